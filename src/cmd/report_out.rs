//! UCX writes its log lines (warnings such as "unused environment variable", or mpool/rcache
//! complaints when a peer dies) to the process's stdout — the same stream that carries `serve`'s
//! listening line and `connect`'s report, which orchestrators parse. Before UCX is loaded, the
//! real stdout is set aside for ic-bench's own output and file descriptor 1 is pointed at stderr,
//! so anything UCX prints lands with the other diagnostics.

use anyhow::Context as _;
use std::io::Write;

/// The original stdout, reserved for reports and machine-readable lines.
pub struct ReportOut(std::fs::File);

/// Call before UCX is loaded. From then on, `print!`/`println!` and UCX's own output go to stderr.
pub fn reserve() -> anyhow::Result<ReportOut> {
    std::io::stdout().flush().context("cannot flush stdout")?;
    let saved = nix::unistd::dup(std::io::stdout()).context("cannot duplicate stdout")?;
    nix::unistd::dup2_stdout(std::io::stderr()).context("cannot point stdout at stderr")?;
    Ok(ReportOut(std::fs::File::from(saved)))
}

impl Write for ReportOut {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}
