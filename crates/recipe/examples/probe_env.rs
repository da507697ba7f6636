//! `cargo run -p icb-recipe --example probe_env -- PATH...` prints the checks as a table and the
//! JSON report: a way to try the rules on a recipe before the CLI wiring lands.

use icb_recipe::{Input, probe_env};

fn main() {
    let inputs: Vec<Input> = std::env::args().skip(1).map(|a| Input::from_arg(&a)).collect();
    match probe_env(&inputs) {
        Ok(report) => {
            for c in &report.checks {
                println!(
                    "{:5} {:24} {} | {}",
                    c.status.as_str(),
                    c.id,
                    c.scope.as_deref().unwrap_or(""),
                    c.detail
                );
            }
            println!("verdict: {}", report.verdict);
            if std::env::var_os("JSON").is_some() {
                println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
            }
            std::process::exit(report.exit_code());
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
