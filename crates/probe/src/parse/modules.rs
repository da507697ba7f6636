//! `lsmod` and `/proc/modules`: module names are the first field; a module is loaded when its name
//! matches exactly (the GPU operator's `^nvidia_peermem\s`), not when it appears in a "used by" list.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Module {
    pub name: String,
    pub used_by: Vec<String>,
}

pub fn parse_modules(text: &str) -> Vec<Module> {
    text.lines()
        .filter_map(|line| {
            // A name must start the line; indented or empty lines are not module entries.
            if line.starts_with(char::is_whitespace) {
                return None;
            }
            let mut fields = line.split_whitespace();
            let name = fields.next()?;
            if name == "Module" {
                return None;
            }
            let _size: u64 = fields.next()?.parse().ok()?;
            let _refs = fields.next()?;
            let used_by = fields
                .next()
                .filter(|u| *u != "-")
                .map(|u| u.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect())
                .unwrap_or_default();
            Some(Module {
                name: name.to_string(),
                used_by,
            })
        })
        .collect()
}

pub fn module_loaded(modules: &[Module], name: &str) -> bool {
    modules.iter().any(|m| m.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsmod_and_proc_modules() {
        let lsmod = "Module                  Size  Used by\nnvidia_peermem         16384  0\nib_core               434176  9 rdma_cm,ib_ipoib,nvidia_peermem,iw_cm\nnvidia              56717312  447 nvidia_uvm,nvidia_peermem,nvidia_modeset\n";
        let m = parse_modules(lsmod);
        assert_eq!(m.len(), 3);
        assert!(module_loaded(&m, "nvidia_peermem"));
        assert_eq!(m[1].used_by.len(), 4);
        let proc_modules =
            "nvidia_peermem 16384 0 - Live 0x0000000000000000 (OE)\nib_core 434176 9 rdma_cm,ib_ipoib, Live 0x0\n";
        assert!(module_loaded(&parse_modules(proc_modules), "nvidia_peermem"));
    }

    #[test]
    fn only_in_a_used_by_list_is_not_loaded() {
        let text = "ib_core 434176 9 rdma_cm,nvidia_peermem - Live 0x0\nnvidia_peermemx 1 0 - Live 0x0\n";
        assert!(!module_loaded(&parse_modules(text), "nvidia_peermem"));
        assert!(parse_modules("lsmod: command not found").is_empty());
    }
}
