//! UCX's own log, captured: a handler pushed on UCX's log-handler stack when the library is
//! loaded counts every warning and error UCX reports and keeps the first of each, so a front end
//! can print one summary line instead of dozens of raw UCX lines before its own error. With
//! [`set_passthrough`] (`-v`, or a `UCX_LOG_LEVEL` the user chose) UCX's default handler prints
//! them as well, unchanged.

use std::ffi::{CStr, c_char, c_uint};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use ucx_sys::{
    UCS_LOG_FUNC_RC_CONTINUE, UCS_LOG_FUNC_RC_STOP, UCS_LOG_LEVEL_ERROR, UCS_LOG_LEVEL_FATAL, UCS_LOG_LEVEL_WARN,
    VaListParam, ucs_log_component_config_t, ucs_log_func_rc_t, ucs_log_level_t,
};

/// Longest message kept (UCX's own lines are short; a config dump is not a first error).
const MAX_MESSAGE: usize = 512;

type Vsnprintf = unsafe extern "C" fn(*mut c_char, std::ffi::c_ulong, *const c_char, VaListParam) -> i32;

/// What UCX logged so far in this process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogSummary {
    pub errors: usize,
    pub warnings: usize,
    /// The first error (or fatal) message, as UCX formatted it.
    pub first_error: Option<String>,
    pub first_warning: Option<String>,
}

impl LogSummary {
    /// One line for stderr, or `None` when UCX said nothing worth a line.
    pub fn line(&self) -> Option<String> {
        let count = |n: usize, what: &str| match n {
            0 => None,
            1 => Some(format!("1 {what}")),
            n => Some(format!("{n} {what}s")),
        };
        let counts: Vec<String> = [count(self.errors, "error"), count(self.warnings, "warning")]
            .into_iter()
            .flatten()
            .collect();
        if counts.is_empty() {
            return None;
        }
        let first = self
            .first_error
            .as_deref()
            .map(|m| format!("first error: {m}"))
            .or_else(|| self.first_warning.as_deref().map(|m| format!("first warning: {m}")))
            .unwrap_or_default();
        Some(format!(
            "UCX logged {} ({first}); -v shows UCX's own lines",
            counts.join(" and ")
        ))
    }
}

struct Capture {
    summary: LogSummary,
    /// The `ucs_log_push_handler` our handler went to: a reloaded libucs needs it again.
    installed_at: Option<usize>,
    vsnprintf: Option<Vsnprintf>,
}

static CAPTURE: Mutex<Capture> = Mutex::new(Capture {
    summary: LogSummary {
        errors: 0,
        warnings: 0,
        first_error: None,
        first_warning: None,
    },
    installed_at: None,
    vsnprintf: None,
});
static PASSTHROUGH: AtomicBool = AtomicBool::new(false);

/// Let UCX print its own lines too (as well as counting them). Off by default.
pub fn set_passthrough(on: bool) {
    PASSTHROUGH.store(on, Ordering::Relaxed);
}

/// What UCX logged so far in this process (warnings and errors).
pub fn summary() -> LogSummary {
    CAPTURE.lock().map(|c| c.summary.clone()).unwrap_or_default()
}

/// Pushes the handler on the loaded UCX's handler stack, once per loaded libucs. A UCX without
/// the handler API (or without vsnprintf) keeps printing its log as before.
pub(crate) fn install(ucp: &ucx_sys::Ucp) {
    let (Ok(push), Ok(vsnprintf)) = (ucp.ucs_log_push_handler.as_ref(), ucp.vsnprintf.as_ref()) else {
        return;
    };
    let Ok(mut capture) = CAPTURE.lock() else { return };
    let at = *push as usize;
    if capture.installed_at == Some(at) {
        return;
    }
    capture.vsnprintf = Some(*vsnprintf);
    capture.installed_at = Some(at);
    drop(capture);
    // SAFETY: `push` is libucs's ucs_log_push_handler, resolved from the loaded library; the
    // handler is a plain function with the ucs_log_func_t signature that lives for the process.
    unsafe { push(Some(handler)) };
}

/// The ucs_log_func_t: counts and keeps warnings and errors, lets everything else through.
unsafe extern "C" fn handler(
    _file: *const c_char,
    _line: c_uint,
    _function: *const c_char,
    level: ucs_log_level_t,
    _comp_conf: *const ucs_log_component_config_t,
    message: *const c_char,
    ap: VaListParam,
) -> ucs_log_func_rc_t {
    let is_error = level <= UCS_LOG_LEVEL_ERROR;
    if level > UCS_LOG_LEVEL_WARN {
        // Info and below appear only when the user raised UCX_LOG_LEVEL: theirs to read.
        return UCS_LOG_FUNC_RC_CONTINUE;
    }
    // A poisoned lock (a panic elsewhere) must not silence UCX: fall back to its printing.
    let Ok(mut capture) = CAPTURE.lock() else {
        return UCS_LOG_FUNC_RC_CONTINUE;
    };
    let keep = if is_error {
        capture.summary.errors += 1;
        capture.summary.first_error.is_none()
    } else {
        capture.summary.warnings += 1;
        capture.summary.first_warning.is_none()
    };
    if keep && let Some(vsnprintf) = capture.vsnprintf {
        let mut buf = [0u8; MAX_MESSAGE];
        // SAFETY: `message` and `ap` are the format and arguments UCX passed for this call (UCX
        // starts a fresh va_list for each handler); vsnprintf writes at most `buf.len()` bytes
        // including the terminating NUL into `buf`, which outlives the call.
        let written = unsafe { vsnprintf(buf.as_mut_ptr().cast(), buf.len() as _, message, ap) };
        if written >= 0 {
            let text = CStr::from_bytes_until_nul(&buf)
                .map(|c| c.to_string_lossy().trim().to_string())
                .unwrap_or_default();
            if is_error {
                capture.summary.first_error = Some(text);
            } else {
                capture.summary.first_warning = Some(text);
            }
        }
    }
    drop(capture);
    if level == UCS_LOG_LEVEL_FATAL || PASSTHROUGH.load(Ordering::Relaxed) {
        UCS_LOG_FUNC_RC_CONTINUE
    } else {
        UCS_LOG_FUNC_RC_STOP
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_line_counts_and_quotes_the_first_error() {
        assert_eq!(LogSummary::default().line(), None);
        let s = LogSummary {
            errors: 3,
            warnings: 31,
            first_error: Some("failed to connect to 10.0.0.5:1234".into()),
            first_warning: Some("transport 'rc' is not available".into()),
        };
        assert_eq!(
            s.line().as_deref(),
            Some(
                "UCX logged 3 errors and 31 warnings (first error: failed to connect to 10.0.0.5:1234); -v shows UCX's own lines"
            )
        );
        let w = LogSummary {
            warnings: 1,
            first_warning: Some("transport 'rc' is not available".into()),
            ..Default::default()
        };
        assert_eq!(
            w.line().as_deref(),
            Some("UCX logged 1 warning (first warning: transport 'rc' is not available); -v shows UCX's own lines")
        );
    }
}
