//! `ic-bench --version`: what was built, and which UCX this machine would load.

pub fn print(long_version: &str) {
    println!("ic-bench {long_version}");
}
