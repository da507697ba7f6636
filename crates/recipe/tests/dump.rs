//! `cargo test -p icb-recipe --test dump -- --ignored --nocapture` prints every fixture's checks
//! (a reading aid when changing rules; asserts nothing by design, so it is ignored).

use icb_recipe::{Input, probe_env};
use std::path::PathBuf;

#[test]
#[ignore = "prints fixtures for humans; the assertions live in fixtures.rs"]
fn dump_all_fixtures() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/recipes");
    for dir in ["good", "fail", "warn", "seed-002", "shapes"] {
        let mut entries: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            println!("==== {}", p.display());
            match probe_env(&[Input::Path(p)]) {
                Ok(r) => {
                    for c in &r.checks {
                        println!(
                            "{:5} {:24} {} | {}",
                            c.status.as_str(),
                            c.id,
                            c.scope.as_deref().unwrap_or(""),
                            c.detail
                        );
                    }
                    println!("-> {}", r.verdict);
                }
                Err(e) => println!("ERROR {e}"),
            }
        }
    }
}
