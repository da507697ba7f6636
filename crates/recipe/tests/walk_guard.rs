//! A directory walk reads regular files only: a FIFO named like a recipe must not hang it.

use icb_recipe::{Input, probe_env};
use std::time::{Duration, Instant};

#[test]
fn a_fifo_in_a_recipe_directory_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/recipes/good/efa.yaml"
    ))
    .unwrap();
    std::fs::write(dir.path().join("deploy.yaml"), good).unwrap();
    let fifo = dir.path().join("stuck.yaml");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success(), "mkfifo failed");
    let input = Input::Path(dir.path().to_path_buf());
    let (done, result) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(probe_env(&[input]).map(|r| r.checks.len()));
    });
    let started = Instant::now();
    let checks = result
        .recv_timeout(Duration::from_secs(20))
        .expect("probing a directory with a FIFO in it hung")
        .expect("the regular recipe is probed");
    assert!(checks > 0);
    assert!(started.elapsed() < Duration::from_secs(20));
}
