//! icb-testcluster's integration tests, one module per file of tests/ (issue 37): one test
//! binary to link instead of 5. A test is `<file>::<test>` here, e.g.
//! `cargo test -p icb-testcluster --test main admission::`. A new tests/*.rs file is a `mod` line
//! below (Cargo.toml has `autotests = false`; tests/ci_script.rs fails CI for a file no binary
//! compiles). Shared support modules are declared once here, so their statics (the one-run-
//! at-a-time locks) are one per binary, as they were one per process.

mod common;

mod admission;
mod api;
mod dra;
mod init_containers;
mod namespaces;
mod ownership;
mod restart;
mod security;
