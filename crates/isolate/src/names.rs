//! Names of everything a run creates. They carry the owner's pid and a random run id so parallel
//! runs never collide and a later run can tell a crashed run's leftovers (owner dead) from a live one.

use crate::error::{IsolateError, Result};
use std::fmt;

/// Prefix used by `ic-bench` itself.
pub const DEFAULT_PREFIX: &str = "icb";

/// Environment variable set on every spawned pod: the run tag, so leftovers can be found in `/proc`.
pub const RUN_TAG_ENV: &str = "ICB_ISOLATE_RUN";

const MAX_PREFIX: usize = 12;
const MAX_NODE: usize = 32;

/// `{prefix}-{owner pid}-{random id}`: the root of every name one run creates.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RunTag {
    prefix: String,
    owner: u32,
    id: String,
}

impl RunTag {
    /// A fresh tag owned by this process.
    pub fn new(prefix: &str) -> Result<Self> {
        validate_prefix(prefix)?;
        Ok(RunTag {
            prefix: prefix.to_string(),
            owner: std::process::id(),
            id: format!("{:08x}", rand::random::<u32>()),
        })
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Pid of the process that created the run (its death makes the run stale).
    pub fn owner(&self) -> u32 {
        self.owner
    }

    /// Network-namespace name of an emulated node.
    pub fn node_netns(&self, node: &str) -> String {
        format!("{self}-{node}")
    }

    /// Network-namespace name of the bridge joining more than two nodes. `_` cannot occur in a
    /// node name, so this never collides with a node's namespace.
    pub fn hub_netns(&self) -> String {
        format!("{self}_hub")
    }

    /// Parses a namespace name or tag value `{prefix}-{pid}-{id}[…]` back to `(tag, owner pid)`.
    pub fn parse_owner(prefix: &str, name: &str) -> Option<u32> {
        let rest = name.strip_prefix(prefix)?.strip_prefix('-')?;
        let (pid, rest) = rest.split_once('-')?;
        let id: String = rest.chars().take_while(|c| c.is_ascii_hexdigit()).collect();
        if id.len() != 8 {
            return None;
        }
        pid.parse().ok()
    }
}

impl fmt::Display for RunTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}-{}", self.prefix, self.owner, self.id)
    }
}

pub(crate) fn validate_prefix(prefix: &str) -> Result<()> {
    let ok = !prefix.is_empty()
        && prefix.len() <= MAX_PREFIX
        && prefix.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(IsolateError::BadName {
            what: "name prefix",
            name: prefix.to_string(),
            max: MAX_PREFIX,
            extra: "",
        })
    }
}

pub(crate) fn validate_node(node: &str) -> Result<()> {
    let ok = !node.is_empty()
        && node.len() <= MAX_NODE
        && !node.starts_with('-')
        && !node.ends_with('-')
        && node
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(IsolateError::BadName {
            what: "node name",
            name: node.to_string(),
            max: MAX_NODE,
            extra: " and '-' (not first or last)",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_unique_and_parse_back() {
        let a = RunTag::new("icb").unwrap();
        let b = RunTag::new("icb").unwrap();
        assert_ne!(a, b);
        assert_eq!(a.owner(), std::process::id());
        assert_eq!(RunTag::parse_owner("icb", &a.node_netns("node-a")), Some(a.owner()));
        assert_eq!(RunTag::parse_owner("icb", &a.hub_netns()), Some(a.owner()));
        assert_eq!(RunTag::parse_owner("icb", &a.to_string()), Some(a.owner()));
    }

    #[test]
    fn foreign_names_are_not_ours() {
        assert_eq!(RunTag::parse_owner("icb", "icbx-12-0000000a-n"), None);
        assert_eq!(RunTag::parse_owner("icb", "icb-12-short-n"), None);
        assert_eq!(RunTag::parse_owner("icb", "icb-notapid-0000000a-n"), None);
        assert_eq!(RunTag::parse_owner("icb", "other"), None);
        assert_eq!(RunTag::parse_owner("icb", "icb-12-0000000a-n"), Some(12));
    }

    #[test]
    fn names_are_validated() {
        assert!(validate_node("node-a").is_ok());
        assert!(validate_node("gpu1").is_ok());
        for bad in ["", "-a", "a-", "Node", "a_b", "a/b", &"x".repeat(33)] {
            let err = validate_node(bad).unwrap_err().to_string();
            assert!(err.contains("bad node name"), "{bad}: {err}");
        }
        assert!(validate_prefix("icb").is_ok());
        for bad in ["", "i-b", "ICB", "abcdefghijklm"] {
            assert!(validate_prefix(bad).is_err(), "{bad}");
        }
        assert!(RunTag::new("bad-prefix").is_err());
    }
}
