//! The one signal handler of the binary: SIGINT (Ctrl-C), SIGTERM (a deleted Job's pod) and SIGHUP
//! (a closed terminal) cancel one `CancellationToken` that every long-running piece of work
//! watches, and the handler remembers which signal it was for the message.
//!
//! It runs on its own small thread so it works whatever runtime (or none) the command uses.
//! `main` installs it for every subcommand ([`Interrupt::install_for_process`]): until a command
//! claims it ([`Interrupt::install`], for commands that honour the token and clean up), a signal
//! prints the one line and exits 130 at once, which is right for commands that created nothing.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
pub use tokio_util::sync::CancellationToken;

#[derive(Clone)]
pub struct Interrupt {
    token: CancellationToken,
    signal: Arc<OnceLock<&'static str>>,
    /// Set when a command honours the token; until then a signal ends the process.
    claimed: Arc<AtomicBool>,
}

/// Why the handler could not be installed (the command stops before it starts anything).
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// An earlier install panicked while holding the process's slot.
    #[error("the signal handler is unusable")]
    Poisoned,
    /// The handler's runtime or thread could not be started.
    #[error("cannot start the signal handler: {0}")]
    Start(std::io::Error),
    /// The kernel refused one of the three signal registrations.
    #[error("cannot install a signal handler: {0}")]
    Register(std::io::Error),
}

/// The process's one handler, once installed.
static PROCESS: Mutex<Option<Interrupt>> = Mutex::new(None);

impl Interrupt {
    /// Installs the process's handler (once; later calls return the same one). A signal before
    /// any command claimed it: the one line, exit 130.
    pub fn install_for_process() -> Result<Interrupt, InstallError> {
        let mut slot = PROCESS.lock().map_err(|_| InstallError::Poisoned)?;
        if let Some(installed) = slot.as_ref() {
            return Ok(installed.clone());
        }
        let installed = Self::start()?;
        *slot = Some(installed.clone());
        Ok(installed)
    }

    /// The handler for a command that honours its token: a signal cancels the token (and the
    /// command reports and cleans up) instead of ending the process.
    pub fn install() -> Result<Interrupt, InstallError> {
        let interrupt = Self::install_for_process()?;
        interrupt.claimed.store(true, Ordering::SeqCst);
        Ok(interrupt)
    }

    fn start() -> Result<Interrupt, InstallError> {
        use tokio::signal::unix::{SignalKind, signal};
        let interrupt = Interrupt {
            token: CancellationToken::new(),
            signal: Arc::default(),
            claimed: Arc::default(),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .map_err(InstallError::Start)?;
        // Registered here, before returning, so a signal right after install is not missed.
        let (mut int, mut term, mut hup) = runtime.block_on(async {
            let make = |kind: SignalKind| signal(kind).map_err(InstallError::Register);
            Ok::<_, InstallError>((
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
                    if !handler.claimed.load(Ordering::SeqCst) {
                        // Nothing was created that needs cleaning up: stop now, with the contract's code.
                        std::process::exit(handler.report("stopped"));
                    }
                    handler.token.cancel();
                })
            })
            .map_err(InstallError::Start)?;
        Ok(interrupt)
    }

    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Which signal cancelled the process's token ("a signal" before any did).
    pub fn signal_name_of_process() -> &'static str {
        PROCESS
            .lock()
            .ok()
            .and_then(|slot| slot.as_ref().map(Interrupt::signal))
            .unwrap_or("a signal")
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

/// [`Interrupt::signal_name_of_process`] as a plain function (for plans that name the signal).
pub fn signal_name() -> &'static str {
    Interrupt::signal_name_of_process()
}

/// A command stopped by a signal after its cleanup, already said on stderr in the handler's
/// one line; carries the exit code (130). `main` exits with it, printing nothing more.
#[derive(Debug)]
pub struct Interrupted(pub i32);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A claimed handler turns SIGTERM into a cancelled token named by its signal, instead of
    /// ending the process; a second install is the same handler.
    #[test]
    fn a_claimed_handler_cancels_its_token_and_names_the_signal() {
        let interrupt = Interrupt::install().unwrap();
        assert_eq!((interrupt.signal(), signal_name()), ("a signal", "a signal"));
        assert!(!interrupt.token().is_cancelled());
        let status = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(10);
        while !interrupt.token().is_cancelled() {
            assert!(
                Instant::now() < deadline,
                "SIGTERM did not cancel the token within 10 s"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(interrupt.signal(), "SIGTERM");
        let again = Interrupt::install_for_process().unwrap();
        assert!(again.token().is_cancelled());
        assert_eq!((again.signal(), signal_name()), ("SIGTERM", "SIGTERM"));
        assert_eq!(interrupt.report("test"), icb_core::exit::INTERRUPTED);
    }

    #[test]
    fn install_errors_keep_their_one_line() {
        let e = InstallError::Register(std::io::Error::other("no"));
        assert_eq!(e.to_string(), "cannot install a signal handler: no");
        assert_eq!(Interrupted(130).to_string(), "interrupted");
    }
}
