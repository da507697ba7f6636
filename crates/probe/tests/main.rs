//! icb-probe's integration tests, one module per file of tests/ (issue 37): one test
//! binary to link instead of 9. A test is `<file>::<test>` here, e.g.
//! `cargo test -p icb-probe --test main counters::`. A new tests/*.rs file is a `mod` line
//! below (Cargo.toml has `autotests = false`; tests/ci_script.rs fails CI for a file no binary
//! compiles). Shared support modules are declared once here, so their statics (the one-run-
//! at-a-time locks) are one per binary, as they were one per process.

mod counters;
mod emulated_rails;
mod nixl_probe;
mod node_fixtures;
mod node_readiness;
mod numa_topology;
mod parsers_never_panic;
mod rail_map;
mod remote_script;
