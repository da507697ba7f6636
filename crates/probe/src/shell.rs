//! POSIX shell quoting for the `export` lines and the scripts run in pods.

use std::borrow::Cow;

/// Single-quotes `s` unless it is made only of characters the shell leaves alone.
pub fn quote(s: &str) -> Cow<'_, str> {
    let safe = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-+=/:.,^@%".contains(c));
    if safe {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(format!("'{}'", s.replace('\'', r"'\''")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(quote("mlx5_0:1,mlx5_1:1"), "mlx5_0:1,mlx5_1:1");
        assert_eq!(quote("=mlx5_1"), "=mlx5_1");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
    }
}
