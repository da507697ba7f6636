//! The one signal handler of the binary: SIGINT (Ctrl-C), SIGTERM (a deleted Job's pod) and SIGHUP
//! (a closed terminal) cancel one `CancellationToken` that every long-running piece of work
//! watches, and the handler remembers which signal it was for the message.
//!
//! It runs on its own small thread so it works whatever runtime (or none) the command uses. It
//! is installed only by commands that honour the token: installing it replaces the default action
//! (die), so a command that ignored the token would no longer stop on Ctrl-C.

use icb_pair::CancellationToken;
use std::sync::{Arc, OnceLock};

#[derive(Clone)]
pub struct Interrupt {
    token: CancellationToken,
    signal: Arc<OnceLock<&'static str>>,
}

impl Interrupt {
    /// Installs the handler. Fails (one line) only when the OS refuses a signal handler.
    pub fn install() -> anyhow::Result<Interrupt> {
        use tokio::signal::unix::{SignalKind, signal};
        let interrupt = Interrupt {
            token: CancellationToken::new(),
            signal: Arc::default(),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .map_err(|e| anyhow::anyhow!("cannot start the signal handler: {e}"))?;
        // Registered here, before returning, so a signal right after install is not missed.
        let (mut int, mut term, mut hup) = runtime.block_on(async {
            let make =
                |kind: SignalKind| signal(kind).map_err(|e| anyhow::anyhow!("cannot install a signal handler: {e}"));
            Ok::<_, anyhow::Error>((
                make(SignalKind::interrupt())?,
                make(SignalKind::terminate())?,
                make(SignalKind::hangup())?,
            ))
        })?;
        let handler = interrupt.clone();
        std::thread::Builder::new()
            .name("ic-bench-signals".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let name = tokio::select! {
                        _ = int.recv() => "SIGINT (Ctrl-C)",
                        _ = term.recv() => "SIGTERM",
                        _ = hup.recv() => "SIGHUP",
                    };
                    let _ = handler.signal.set(name);
                    handler.token.cancel();
                })
            })
            .map_err(|e| anyhow::anyhow!("cannot start the signal handler: {e}"))?;
        Ok(interrupt)
    }

    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Which signal cancelled the token, for "interrupted by …".
    pub fn signal(&self) -> &'static str {
        self.signal.get().copied().unwrap_or("a signal")
    }

    /// Prints the one line for an interrupted run and returns exit code 130.
    pub fn report(&self, what: &str) -> i32 {
        eprintln!("ic-bench: interrupted by {}: {what}", self.signal());
        icb_core::exit::INTERRUPTED
    }
}
