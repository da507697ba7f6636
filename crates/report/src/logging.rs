//! ic-bench's own log on stderr: `-v` raises it, `IC_BENCH_LOG` (an `EnvFilter`) replaces it.
//! Set once by `main` before any subcommand runs.

use std::io::IsTerminal as _;

/// The filter for `-v` given `verbose` times, when `IC_BENCH_LOG` does not say.
pub fn default_filter(verbose: u8) -> &'static str {
    match verbose {
        // kube-rs logs every failed attempt at ERROR; ic-bench reports the outcome in one line itself.
        0 => "warn,kube_client=off,kube_runtime=off",
        1 => "info,kube_client=warn",
        _ => "debug",
    }
}

/// Installs the log on stderr (coloured on a terminal); a second call changes nothing.
pub fn init(verbose: u8) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("IC_BENCH_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter(verbose)));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_level_is_a_valid_filter_and_quiet_keeps_kube_rs_retries_out() {
        for verbose in 0..=3 {
            let text = default_filter(verbose);
            assert!(tracing_subscriber::EnvFilter::try_new(text).is_ok(), "{text}");
        }
        assert!(default_filter(0).contains("kube_client=off"));
        assert_eq!(default_filter(2), default_filter(9));
    }
}
