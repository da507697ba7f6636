//! icb-report's integration tests, one module per file of tests/ (issue 37): one test
//! binary to link instead of 9. A test is `<file>::<test>` here, e.g.
//! `cargo test -p icb-report --test main baseline_marks::`. A new tests/*.rs file is a `mod` line
//! below (Cargo.toml has `autotests = false`; tests/ci_script.rs fails CI for a file no binary
//! compiles). Shared support modules are declared once here, so their statics (the one-run-
//! at-a-time locks) are one per binary, as they were one per process.

mod common;
mod sweep_fixture;

mod baseline_marks;
mod case_nic_text;
mod controls_export;
mod diagnostic_layout;
mod doc_links;
mod exporters;
mod masking;
mod narrow_tables;
mod rails_pair;
mod readiness_text;
mod schema_doc;
mod sweep_exporters;
mod sweep_rails;
