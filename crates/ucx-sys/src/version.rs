//! The run-time UCX version and the rule that refuses libraries older than ic-bench can drive.

use std::fmt;

/// A UCX release as `ucp_get_version()` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub release: u32,
}

impl Version {
    pub const fn new(major: u32, minor: u32, release: u32) -> Self {
        Self { major, minor, release }
    }

    /// True when this release is at least `major.minor` (the release number never gates an API).
    pub fn at_least(&self, major: u32, minor: u32) -> bool {
        (self.major, self.minor) >= (major, minor)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.release)
    }
}

/// The oldest UCX ic-bench drives: 1.14 added `UCP_EP_ATTR_FIELD_TRANSPORTS`, and older
/// releases return garbage for it (then crash) instead of an error.
pub const MIN_SUPPORTED: Version = Version::new(1, 14, 0);

/// A UCX release ic-bench does not drive: which one, and where it was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "UCX {found} at {path} is not supported (ic-bench needs UCX >= {}.{}, major {}); \
     point ic-bench at a newer UCX with --ucx-lib DIR or IC_BENCH_UCX_LIB=DIR",
    MIN_SUPPORTED.major,
    MIN_SUPPORTED.minor,
    MIN_SUPPORTED.major
)]
pub struct UnsupportedVersion {
    pub found: Version,
    pub path: String,
}

/// Pure version rule, separate from loading so that it can be tested without an old UCX.
/// The error is the one line a user sees.
pub fn check_runtime_version(found: Version, path: &str) -> Result<(), UnsupportedVersion> {
    if found.major != MIN_SUPPORTED.major || found.minor < MIN_SUPPORTED.minor {
        return Err(UnsupportedVersion {
            found,
            path: path.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_1_13_and_accepts_1_14_and_later() {
        let err = check_runtime_version(Version::new(1, 13, 1), "/usr/lib/libucp.so.0").unwrap_err();
        assert_eq!(err.found, Version::new(1, 13, 1));
        let err = err.to_string();
        assert!(err.contains("UCX 1.13.1"), "{err}");
        assert!(err.contains("--ucx-lib") && err.contains("IC_BENCH_UCX_LIB"), "{err}");
        assert!(!err.contains('\n'));
        assert!(check_runtime_version(Version::new(1, 14, 0), "x").is_ok());
        assert!(check_runtime_version(Version::new(1, 22, 0), "x").is_ok());
        assert!(check_runtime_version(Version::new(1, 9, 0), "x").is_err());
        // A future 2.x changes the ABI: refuse rather than guess.
        assert!(check_runtime_version(Version::new(2, 0, 0), "x").is_err());
        assert!(check_runtime_version(Version::new(0, 99, 0), "x").is_err());
    }

    #[test]
    fn at_least_ignores_release() {
        let v = Version::new(1, 14, 0);
        assert!(v.at_least(1, 14));
        assert!(!v.at_least(1, 15));
        assert!(Version::new(1, 22, 3).at_least(1, 14));
        assert_eq!(v.to_string(), "1.14.0");
    }
}
