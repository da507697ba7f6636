//! The one line every error ends as (`ic-bench: error: LINE`): the cause chain joined so both
//! the cause and the fix are visible, without repeating a cause that an outer message already
//! quotes, and with credentials masked (errors quote inputs: URLs, flag values). One rule, so a
//! command's error and a side's `failed` line read alike.

/// `e` and its sources on one line: `what failed: root cause`.
pub fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = String::new();
    for cause in std::iter::successors(Some(e), |e| e.source()).map(|c| c.to_string()) {
        let cause = cause.trim();
        if cause.is_empty() || msg.contains(cause) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(cause);
    }
    crate::secrets::mask_text(&msg.replace('\n', " "))
}

/// Most characters of outside text one error line quotes.
pub const MAX_QUOTED: usize = 240;

/// Text that came from outside (a peer's message, a parse error quoting it) made fit for one
/// error line: control characters (newlines, escape sequences) shown escaped, and at most
/// [`MAX_QUOTED`] characters, the middle cut out (a parse error's head names what is wrong, its
/// tail where and what was expected). A peer then cannot split a log line, colour a terminal or
/// make one line a megabyte long.
pub fn quote_outside(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            escaped.extend(c.escape_default());
        } else {
            escaped.push(c);
        }
    }
    let n = escaped.chars().count();
    if n <= MAX_QUOTED {
        return escaped;
    }
    let half = MAX_QUOTED / 2;
    let head: String = escaped.chars().take(half).collect();
    let tail: String = escaped.chars().skip(n - half).collect();
    format!("{head}…{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_text_is_escaped_and_bounded() {
        assert_eq!(quote_outside("plain text"), "plain text");
        assert_eq!(quote_outside("a\nb\r\u{1b}[31mc"), "a\\nb\\r\\u{1b}[31mc");
        let long = format!("unknown variant `{}`, expected `host` or `cuda`", "x".repeat(10_000));
        let q = quote_outside(&long);
        assert_eq!(q.chars().count(), MAX_QUOTED + 1);
        assert!(
            q.starts_with("unknown variant `xx") && q.ends_with("expected `host` or `cuda`"),
            "{q}"
        );
        assert_eq!(quote_outside(&"é".repeat(MAX_QUOTED)), "é".repeat(MAX_QUOTED));
    }

    /// An error with an optional cause, as a context layer wraps one.
    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|l| l as _)
        }
    }

    #[test]
    fn the_chain_is_one_line_without_repeats() {
        let e = Layer("what failed", Some(Box::new(Layer("root cause", None))));
        assert_eq!(one_line(&e), "what failed: root cause");
        let quoted = Layer(
            "cannot bind 0.0.0.0:1: Address already in use (os error 98): pick another --listen port",
            Some(Box::new(Layer("Address already in use (os error 98)", None))),
        );
        assert_eq!(
            one_line(&quoted),
            "cannot bind 0.0.0.0:1: Address already in use (os error 98): pick another --listen port"
        );
        let multi = Layer("first\nsecond", Some(Box::new(Layer("", None))));
        assert_eq!(one_line(&multi), "first second");
    }
}
