//! `ic-bench --version`: what was built, and which UCX this machine would load (the same search
//! `serve`/`connect` use, so the answer predicts what a run will get).

pub fn print(long_version: &str) {
    println!("ic-bench {long_version}");
    // None: the loader reads IC_BENCH_UCX_LIB itself, like serve and connect.
    match ucx::Ucx::load(None) {
        Ok(u) => println!("UCX runtime {} from {}", u.version_string(), u.library_dir().display()),
        // One line whatever the loader said (dlerror text can hold newlines), newline-terminated.
        Err(e) => println!(
            "UCX runtime: not usable: {}",
            e.to_string().replace('\n', " ").trim_end()
        ),
    }
}
