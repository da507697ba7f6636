//! clap's errors in one line, as every other `ic-bench` error is said (the usage block left out).

/// clap's error without its usage block: the first line, plus its tip when it has one. A first
/// line that ends in ':' ("the following required arguments were not provided:") is completed
/// with the lines it introduces (the missing flags), which clap puts on lines of their own.
pub fn one_line_clap_error(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    let mut lines = rendered
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take_while(|l| !l.starts_with("Usage:"));
    let mut first = lines
        .next()
        .unwrap_or("invalid arguments")
        .trim_start_matches("error: ")
        .to_string();
    let rest: Vec<&str> = lines.collect();
    if first.ends_with(':') {
        let named: Vec<&str> = rest.iter().copied().filter(|l| !l.starts_with("tip:")).collect();
        if !named.is_empty() {
            first = format!("{} {}", first, named.join(", "));
        }
    }
    // A value outside a fixed set: the set (clap's own context, not its wording), so the line
    // says what to write instead.
    if let Some(clap::error::ContextValue::Strings(values)) = e.get(clap::error::ContextKind::ValidValue) {
        first = format!("{first}; possible values: {}", values.join(", "));
    }
    match rest.iter().find(|l| l.starts_with("tip:")) {
        Some(tip) => format!("{first}; {tip}"),
        None => first,
    }
}

#[cfg(test)]
mod tests {
    use super::one_line_clap_error;
    use clap::Parser;

    /// A command line with the shapes whose errors clap renders differently.
    #[derive(Parser, Debug)]
    #[command(name = "ic-bench")]
    struct Cli {
        #[arg(long, required = true)]
        decode: String,
        #[arg(short = 'o', long = "output", value_name = "FORMAT", value_parser = ["table", "json"], default_value = "table")]
        output: String,
    }

    fn error_of(args: &[&str]) -> String {
        let e = Cli::try_parse_from(args).expect_err("an error");
        one_line_clap_error(&e)
    }

    #[test]
    fn an_unknown_flag_is_one_line_with_its_tip() {
        let line = error_of(&["ic-bench", "--decod", "x"]);
        assert!(line.starts_with("unexpected argument '--decod' found"), "{line}");
        assert!(line.contains("; tip: a similar argument exists: '--decode'"), "{line}");
        assert!(!line.contains('\n') && !line.contains("Usage"), "{line}");
    }

    #[test]
    fn a_value_outside_a_fixed_set_lists_the_set() {
        let line = error_of(&["ic-bench", "--decode", "x", "-o", "bogus"]);
        assert_eq!(
            line,
            "invalid value 'bogus' for '--output <FORMAT>'; possible values: table, json"
        );
    }

    #[test]
    fn a_missing_argument_is_named_on_the_same_line() {
        let line = error_of(&["ic-bench"]);
        assert_eq!(
            line,
            "the following required arguments were not provided: --decode <DECODE>"
        );
    }
}
