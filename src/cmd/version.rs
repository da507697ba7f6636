//! `ic-bench --version`: what was built, and which UCX this machine would load (the same search
//! `serve`/`connect` use, so the answer predicts what a run will get).

pub fn print(long_version: &str) {
    println!("ic-bench {long_version}");
    let explicit = std::env::var_os("IC_BENCH_UCX_LIB").map(std::path::PathBuf::from);
    match ucx::Ucx::load(explicit.as_deref()) {
        Ok(u) => println!("UCX runtime {} from {}", u.version_string(), u.library_dir().display()),
        Err(e) => println!("UCX runtime: not usable: {e}"),
    }
}
