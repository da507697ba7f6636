//! icb-isolate (being written): Linux namespaces that reproduce containers, pods and nodes.
#![forbid(unsafe_code)]

mod gate;
pub use gate::privileged_tests_enabled;
