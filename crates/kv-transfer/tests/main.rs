//! icb-kv-transfer's integration tests, one module per file of tests/ (issue 37): one test binary
//! to link. A test is `<file>::<test>` here, e.g. `cargo test -p icb-kv-transfer --test main
//! coordinator_auth::`. A new tests/*.rs file is a `mod` line below (Cargo.toml has
//! `autotests = false`; tests/ci_script.rs fails CI for a file no binary compiles).

mod coordinator_auth;
mod ranks_scripted;
