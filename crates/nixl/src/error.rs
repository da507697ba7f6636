//! NIXL errors, one line each.

use nixl_sys::LoadError;

#[derive(Debug, thiserror::Error)]
pub enum NixlError {
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A C API call returned an error status.
    #[error("NIXL {call} failed: {}", status_text(*status))]
    Call { call: &'static str, status: i32 },
    #[error(
        "NIXL has no UCX backend plugin (plugins found: {found}); install NIXL with its UCX plugin, or set NIXL_PLUGIN_DIR"
    )]
    NoUcxPlugin { found: String },
    #[error("invalid input to NIXL {call}: {detail}")]
    Input { call: &'static str, detail: String },
}

/// The meaning of a `nixl_capi_status_t`.
pub fn status_text(status: i32) -> String {
    let what = match status {
        0 => "success",
        1 => "in progress",
        -1 => "invalid parameter",
        -2 => "backend error",
        -3 => "invalid state",
        -4 => "exception inside NIXL",
        -5 => "no telemetry",
        -6 => "not found (remote metadata not loaded, or no backend serves the request)",
        _ => "unknown status",
    };
    format!("{what} (status {status})")
}

pub(crate) fn check(call: &'static str, status: i32) -> Result<(), NixlError> {
    if status == 0 {
        Ok(())
    } else {
        Err(NixlError::Call { call, status })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_read_as_words() {
        let e = NixlError::Call {
            call: "post_xfer_req",
            status: -2,
        };
        assert_eq!(e.to_string(), "NIXL post_xfer_req failed: backend error (status -2)");
        assert!(check("x", 0).is_ok());
        assert!(status_text(42).contains("unknown"));
    }
}
