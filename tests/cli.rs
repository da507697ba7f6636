//! ic-bench's CLI and script tests (no cluster, no namespaces, no measurement), one module per file
//! of tests/ (issue 37): one test binary to link instead of 9. A test is `<file>::<test>` here,
//! e.g. `cargo test -p ic-bench --test cli ci_script::`. A new tests/*.rs file is a `mod` line here
//! or a `[[test]]` of its own in Cargo.toml (`autotests = false`; tests/ci_script.rs fails CI for
//! a file no binary compiles).

mod ci_script;
mod cli_validation;
mod fuzz_campaign_script;
mod gpu_check_alloc;
mod gpu_check_script;
mod probe_cli;
mod probe_env_dra_cli;
mod probe_env_inputs_cli;
mod probe_serving_cli;
mod stdout_contract;
mod sweep_cli;
mod vocabulary_agreement;
