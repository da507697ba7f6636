//! ic-bench's emulated-cluster tests, one module per file of tests/ (issue 37): one test binary to
//! link instead of 21. A test is `<file>::<test>` here, e.g.
//! `cargo test -p ic-bench --test kube gate_kube::`. A new tests/*.rs file is a `mod` line here or
//! a `[[test]]` of its own in Cargo.toml (`autotests = false`; tests/ci_script.rs fails CI for a
//! file no binary compiles). `pair_kube_support` is declared once here.

mod monitoring_support;
mod pair_kube_support;

mod gate_conditions;
mod gate_kube;
mod gate_kube_bench;
mod gate_kv_kube;
mod gate_rails_kube;
mod manifests;
mod monitoring;
mod pair_kube;
mod pair_kube_bench;
mod pair_kube_cli;
mod pair_kube_counters;
mod pair_kube_devices;
mod pair_kube_dra;
mod pair_kube_faults;
mod pair_kube_readiness;
mod pair_kv_kube;
mod pod_security_kube;
mod preflight_kube;
mod probe_env_kube;
mod probe_kube;
mod probe_serving_kube;
mod signals_at_every_step;
mod sweep_conditions;
mod sweep_controls_kube;
mod sweep_kube;
mod sweep_labels;
mod sweep_link_loss;
mod sweep_matrix;
mod sweep_rails_kube;
mod sweep_stops;
mod sweep_tcp_only;
