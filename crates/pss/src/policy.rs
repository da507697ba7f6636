//! Levels and a namespace's policy, read from its labels as the admission plugin reads them.

use std::collections::BTreeMap;
use std::fmt;

pub const ENFORCE_LABEL: &str = "pod-security.kubernetes.io/enforce";
pub const ENFORCE_VERSION_LABEL: &str = "pod-security.kubernetes.io/enforce-version";
pub const WARN_LABEL: &str = "pod-security.kubernetes.io/warn";
pub const AUDIT_LABEL: &str = "pod-security.kubernetes.io/audit";

/// A Pod Security Standard level, from the most open to the most closed (ordered that way).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Privileged,
    Baseline,
    Restricted,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }

    /// A label value; `None` for anything else.
    pub fn parse(value: &str) -> Option<Level> {
        match value {
            "privileged" => Some(Level::Privileged),
            "baseline" => Some(Level::Baseline),
            "restricted" => Some(Level::Restricted),
            _ => None,
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A level and the version of the standards it was asked for (`restricted:latest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelVersion {
    pub level: Level,
    pub version: String,
}

impl fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.level, self.version)
    }
}

/// What a namespace's labels ask of the pods created in it; unlabelled modes are `privileged`
/// (the API server's default configuration: nothing enforced).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespacePolicy {
    pub enforce: LevelVersion,
    pub warn: LevelVersion,
    pub audit: LevelVersion,
}

impl NamespacePolicy {
    /// Reads the three modes. A label with an unknown level fails closed to `restricted`, as the
    /// admission plugin does; an unknown or missing version is `latest`.
    pub fn from_labels(labels: &BTreeMap<String, String>) -> NamespacePolicy {
        let mode = |name: &str| {
            let level = labels
                .get(name)
                .map_or(Level::Privileged, |v| Level::parse(v).unwrap_or(Level::Restricted));
            let version = labels
                .get(&format!("{name}-version"))
                .filter(|v| *v == "latest" || v.starts_with('v'))
                .cloned()
                .unwrap_or_else(|| "latest".into());
            LevelVersion { level, version }
        };
        NamespacePolicy {
            enforce: mode(ENFORCE_LABEL),
            warn: mode(WARN_LABEL),
            audit: mode(AUDIT_LABEL),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_read_per_mode_and_unknown_levels_fail_closed() {
        let labels: BTreeMap<String, String> = [
            (ENFORCE_LABEL, "baseline"),
            (ENFORCE_VERSION_LABEL, "v1.30"),
            (WARN_LABEL, "bogus"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let p = NamespacePolicy::from_labels(&labels);
        assert_eq!(p.enforce.to_string(), "baseline:v1.30");
        assert_eq!(p.warn.level, Level::Restricted);
        assert_eq!(p.audit.to_string(), "privileged:latest");
        assert!(Level::Restricted > Level::Baseline && Level::Baseline > Level::Privileged);
    }
}
