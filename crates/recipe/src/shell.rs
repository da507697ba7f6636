//! Reading container command lines the way a shell would: words (quotes, escapes, line
//! continuations) and the variables a script sets for the engine (`export A=B`, `A=B cmd`).

/// Splits a shell command the way `bash -c` would for our purposes: quotes, backslash
/// escapes and line continuations. Never fails: an unterminated quote ends at the text's end.
pub fn shell_words(text: &str) -> Vec<String> {
    split_words(text, false)
}

/// Words of one simple command, keeping `$(…)` with its spaces inside one word.
fn command_words(cmd: &str) -> Vec<String> {
    split_words(cmd, true)
}

/// The one word splitter behind [`shell_words`] and [`command_words`]: with `substitutions`,
/// a `$(…)` outside quotes is copied verbatim into its word (its value is only known in the pod).
fn split_words(text: &str, substitutions: bool) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut depth = 0usize;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if depth > 0 {
            cur.push(c);
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            continue;
        }
        match c {
            '$' if substitutions && chars.peek() == Some(&'(') => {
                in_word = true;
                depth = 1;
                cur.push(c);
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    cur.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        // Inside double quotes a backslash escapes only these (and a newline).
                        '\\' => match chars.peek() {
                            Some(&n @ ('"' | '\\' | '$' | '`')) => {
                                cur.push(n);
                                chars.next();
                            }
                            Some('\n') => {
                                chars.next();
                            }
                            _ => cur.push('\\'),
                        },
                        _ => cur.push(q),
                    }
                }
            }
            '\\' => {
                if let Some(n) = chars.next().filter(|n| *n != '\n') {
                    in_word = true;
                    cur.push(n);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

/// A variable a container's shell script sets for the engine: `export A=B C=D`, or a leading
/// `A=B cmd …` assignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellVar {
    pub name: String,
    /// The text as written; `$(…)`/`` `…` ``/`$VAR` are kept (the value is computed at run time).
    pub value: String,
    pub exported: bool,
}

impl ShellVar {
    /// Set from a command substitution or another variable: only known in the pod.
    pub fn computed(&self) -> bool {
        self.value.contains("$(") || self.value.contains('`') || self.value.contains('$')
    }
}

/// Splits a script into simple commands at `;`, `&&`, `||`, `|`, `&` and newlines, outside
/// quotes and `$(…)`. Never fails on unbalanced input.
fn simple_commands(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = script.chars().peekable();
    let (mut single, mut double, mut depth) = (false, false, 0usize);
    while let Some(c) = chars.next() {
        match c {
            '\\' if !single => {
                cur.push(c);
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
                continue;
            }
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '$' if !single && chars.peek() == Some(&'(') => {
                depth += 1;
                cur.push(c);
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
                continue;
            }
            '(' if !single && !double && depth > 0 => depth += 1,
            ')' if !single && depth > 0 => depth -= 1,
            ';' | '\n' | '&' | '|' if !single && !double && depth == 0 => {
                if !cur.trim().is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out
}

fn assignment(word: &str) -> Option<(String, String)> {
    let (name, value) = word.split_once('=')?;
    let valid = !name.is_empty()
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then(|| (name.to_string(), value.to_string()))
}

/// Variables a container's scripts set: `export A=B` anywhere, and `A=B` before a command (the
/// seed-002 fix computes `CUDA_VISIBLE_DEVICES=$(…) python3 -m sglang…`). Commented lines and
/// quoted text are not commands. Later assignments win.
pub fn shell_vars(words: &[String]) -> Vec<ShellVar> {
    let mut out: Vec<ShellVar> = Vec::new();
    let mut set = |name: String, value: String, exported: bool| {
        out.retain(|v| v.name != name);
        out.push(ShellVar { name, value, exported });
    };
    for script in words.iter().filter(|w| w.contains('=')) {
        for cmd in simple_commands(script) {
            let cmd = cmd.trim();
            if cmd.starts_with('#') {
                continue;
            }
            let ws = command_words(cmd);
            match ws.first().map(String::as_str) {
                Some("export") | Some("declare") => {
                    for w in &ws[1..] {
                        if let Some((n, v)) = assignment(w) {
                            set(n, v, true);
                        }
                    }
                }
                _ => {
                    for w in &ws {
                        match assignment(w) {
                            Some((n, v)) => set(n, v, false),
                            None => break,
                        }
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(script: &str) -> Vec<(String, String)> {
        shell_vars(&[script.to_string()])
            .into_iter()
            .map(|v| (v.name, v.value))
            .collect()
    }

    #[test]
    fn exports_and_leading_assignments() {
        assert_eq!(
            vars("export UCX_TLS=tcp NCCL_IB_DISABLE=1 && python3 -m dynamo.vllm --model m"),
            vec![("UCX_TLS".into(), "tcp".into()), ("NCCL_IB_DISABLE".into(), "1".into())]
        );
        let seed = "sleep 30 && CUDA_VISIBLE_DEVICES=$(find /proc/driver/nvidia/gpus/ -type d | sort | paste -sd, ) python3 -m sglang.launch_server --tp 2";
        let v = shell_vars(&[seed.to_string()]);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].name, "CUDA_VISIBLE_DEVICES");
        assert!(v[0].computed());
        assert_eq!(
            vars("UCX_TLS='rc,cuda_copy' vllm serve m; echo A=B"),
            vec![("UCX_TLS".into(), "rc,cuda_copy".into())]
        );
        // Not commands: an argument, a comment, quoted text.
        assert!(vars("python3 x.py --opt A=B").is_empty());
        assert!(vars("# export UCX_TLS=tcp\npython3 x.py").is_empty());
        assert!(vars("echo 'export UCX_TLS=tcp'").is_empty());
    }

    #[test]
    fn one_splitter_keeps_substitutions_whole_only_for_commands() {
        let line = r#"A=$(paste -sd, x) python3 "a \"b\" \c" d\ e"#;
        assert_eq!(
            shell_words(line),
            ["A=$(paste", "-sd,", "x)", "python3", r#"a "b" \c"#, "d e"]
        );
        assert_eq!(
            command_words(line),
            ["A=$(paste -sd, x)", "python3", r#"a "b" \c"#, "d e"]
        );
        // A line continuation joins; an unterminated quote ends at the end of the text.
        assert_eq!(shell_words("a \\\nb 'c d"), ["a", "b", "c d"]);
    }
}
