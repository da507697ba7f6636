//! icb-recipe's integration tests, one module per file of tests/ (issue 37): one test
//! binary to link instead of 12. A test is `<file>::<test>` here, e.g.
//! `cargo test -p icb-recipe --test main fixtures::`. A new tests/*.rs file is a `mod` line
//! below (Cargo.toml has `autotests = false`; tests/ci_script.rs fails CI for a file no binary
//! compiles). Shared support modules are declared once here, so their statics (the one-run-
//! at-a-time locks) are one per binary, as they were one per process.

mod finding_layout;
mod fixtures;
mod proptest_loader;
mod proptest_secrets;
mod recipe_alloc_rules;
mod recipe_consistency;
mod recipe_dra_rules;
mod recipe_inputs;
mod recipe_kinds;
mod recipe_layering;
mod recipe_nic_rules;
mod recipe_roles;
mod recipe_rules;
mod recipe_sets;
mod walk_guard;
