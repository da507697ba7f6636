//! `serve`: the decode side, like `ucx_perftest` started without a peer address.

use super::EngineChoice;
use icb_core::ToolInfo;
use icb_core::protocol::SideWriter;
use icb_engine::admit::ServeGuard;
use icb_engine::{EngineError, Listening, ServeOptions, UcxOptions, UcxProfile};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A server, as the flags say.
pub struct Serve {
    /// `ADDR:PORT` to listen on.
    pub listen: String,
    /// One client, then exit.
    pub once: bool,
    pub idle_timeout: Option<Duration>,
    pub engine: EngineChoice,
    /// `--ucx-lib` and `--ucx-profile`.
    pub ucx_lib: Option<PathBuf>,
    pub ucx_profile: UcxProfile,
    pub tool: ToolInfo,
    /// Who is admitted, and what one client may ask.
    pub guard: ServeGuard,
    /// Started by a launching ic-bench: an error is also the typed `failed` line on `out`.
    pub side_events: bool,
}

/// Serves clients until `cancel` (or after one, `once`), saying where it listens as one typed
/// line on `out` (launchers read the port from it).
pub fn serve<W: std::io::Write + Send + 'static>(
    serve: Serve,
    out: &Arc<SideWriter<W>>,
    cancel: &CancellationToken,
) -> Result<(), EngineError> {
    let listening_out = Arc::clone(out);
    let opts = ServeOptions {
        listen: serve.listen,
        once: serve.once,
        idle_timeout: serve.idle_timeout,
        ucx: UcxOptions {
            library_dir: serve.ucx_lib,
            ..Default::default()
        }
        .with_profile(serve.ucx_profile),
        tool: serve.tool,
        on_listening: Some(Box::new(move |l: &Listening| {
            // One typed line on stdout: launchers read the port from it (pipes, pod logs).
            let _ = listening_out.listening(l.address.to_string(), l.ucx_version.clone());
        })),
        cancel: Some(cancel.clone()),
        guard: serve.guard,
    };
    serve.engine.serve(opts).inspect_err(|e| {
        // stdout is the protocol channel: the parent reads why, typed, from there.
        if serve.side_events && !matches!(e, EngineError::Interrupted) {
            let _ = out.failed(e.side_failure());
        }
    })
}
