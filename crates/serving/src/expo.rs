//! The Prometheus text exposition format (what a `/metrics` endpoint serves and `--metrics FILE`
//! holds), read into samples. Only what the engines' metrics use: `name{labels} value
//! [timestamp]` lines; comments and `# TYPE`/`# HELP` are skipped, since a histogram's parts are
//! recognised by their `_sum`/`_count` suffixes and a counter by its value.

use std::collections::BTreeMap;

/// One sample: a metric name, its labels, its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

impl Sample {
    /// The labels that say which series this is, without a histogram's `le` and the labels
    /// Prometheus adds to every target's series (kept: `instance` names the worker).
    pub fn series(&self) -> String {
        self.labels
            .iter()
            .filter(|(k, _)| k.as_str() != "le" && k.as_str() != "quantile")
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Why a line could not be read: its number and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    pub line: usize,
    pub why: String,
}

/// Every sample of `text`; a line that is not a sample is an error naming its line number.
pub fn parse(text: &str) -> Result<Vec<Sample>, LineError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: &str| LineError {
            line: i + 1,
            why: why.to_string(),
        };
        let name_end = line
            .find(|c: char| c == '{' || c.is_whitespace())
            .ok_or_else(|| bad("a name with no value"))?;
        let name = &line[..name_end];
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            return Err(bad("not a metric name"));
        }
        let (labels, rest) = if line[name_end..].starts_with('{') {
            let (labels, used) = parse_labels(&line[name_end + 1..]).map_err(|w| bad(&w.to_string()))?;
            (labels, &line[name_end + 1 + used..])
        } else {
            (BTreeMap::new(), &line[name_end..])
        };
        let value = rest.split_whitespace().next().ok_or_else(|| bad("no value"))?;
        let value = parse_value(value).ok_or_else(|| bad("the value is not a number"))?;
        out.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    Ok(out)
}

/// `+Inf`, `-Inf`, `NaN` and Rust's float syntax.
pub fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

/// What is wrong with a sample's labels.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum LabelsError {
    #[error("labels without a closing '}}'")]
    Unclosed,
    #[error("label '{0}' has no quoted value")]
    NoValue(String),
    #[error("label '{0}' has an unterminated value")]
    Unterminated(String),
}

/// `k="v",k2="v2"}` → the labels and the bytes used, through the closing brace.
fn parse_labels(s: &str) -> Result<(BTreeMap<String, String>, usize), LabelsError> {
    let mut labels = BTreeMap::new();
    let bytes: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut used = 0;
    loop {
        while i < bytes.len() && (bytes[i] == ',' || bytes[i] == ' ') {
            used += bytes[i].len_utf8();
            i += 1;
        }
        if i >= bytes.len() {
            return Err(LabelsError::Unclosed);
        }
        if bytes[i] == '}' {
            return Ok((labels, used + 1));
        }
        let start = i;
        while i < bytes.len() && bytes[i] != '=' {
            i += 1;
        }
        let key: String = bytes[start..i].iter().collect();
        used += key.len();
        if i + 1 >= bytes.len() || bytes[i + 1] != '"' {
            return Err(LabelsError::NoValue(key.trim().to_string()));
        }
        i += 2;
        used += 2;
        let mut value = String::new();
        loop {
            let Some(&c) = bytes.get(i) else {
                return Err(LabelsError::Unterminated(key.trim().to_string()));
            };
            i += 1;
            used += c.len_utf8();
            match c {
                '"' => break,
                '\\' => {
                    let e = bytes.get(i).copied().unwrap_or('\\');
                    i += 1;
                    used += e.len_utf8();
                    value.push(if e == 'n' { '\n' } else { e });
                }
                c => value.push(c),
            }
        }
        labels.insert(key.trim().to_string(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_with_labels_escapes_and_timestamps() {
        let s = parse(
            "# HELP x y\n# TYPE x histogram\nx_bucket{le=\"+Inf\",model_name=\"a \\\"b\\\"\"} 3 1700000000\nup 1\n",
        )
        .unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].labels["model_name"], "a \"b\"");
        assert_eq!(s[0].value, 3.0);
        assert_eq!(s[0].series(), "model_name=a \"b\"");
        assert_eq!(s[1].name, "up");
    }

    #[test]
    fn a_broken_line_is_named() {
        let e = parse("ok 1\nbroken{a=\"x\" 2\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = parse("x{a=\"1\"} notanumber\n").unwrap_err();
        assert!(e.why.contains("not a number"), "{e:?}");
    }
}
