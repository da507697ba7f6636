//! icb-pair's integration tests, one module per file of tests/ (issue 37): one test
//! binary to link instead of 6. A test is `<file>::<test>` here, e.g.
//! `cargo test -p icb-pair --test main kv_coordinator_auth::`. A new tests/*.rs file is a `mod` line
//! below (Cargo.toml has `autotests = false`; tests/ci_script.rs fails CI for a file no binary
//! compiles). Shared support modules are declared once here, so their statics (the one-run-
//! at-a-time locks) are one per binary, as they were one per process.

mod kv_coordinator_auth;
mod kv_cpus;
mod kv_ranks_scripted;
mod launch_kinds;
mod pipeline;
mod rails_scripted;
