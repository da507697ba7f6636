//! Byte sizes and bandwidth formatting. Binary suffixes (KiB, MiB, GiB, and the ucx_perftest
//! style K/M/G) are powers of two; decimal ones (kB, MB, GB) are powers of ten.

use crate::ParseError;

/// Parses `8`, `4KiB`, `4K`, `1MiB`, `64m`, `1GB`, `10kB` into bytes. Zero is rejected: a
/// zero-byte message measures nothing.
pub fn parse_size(text: &str) -> Result<u64, ParseError> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(split);
    let bad = || {
        ParseError::new(format!(
            "bad size '{text}': use a positive number with an optional unit, e.g. 8, 4KiB, 64MiB, 1GB"
        ))
    };
    if digits.is_empty() {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let mult: u64 = match suffix.trim() {
        "" | "B" | "b" => 1,
        "K" | "k" | "KiB" | "Ki" | "kib" => 1 << 10,
        "M" | "m" | "MiB" | "Mi" | "mib" => 1 << 20,
        "G" | "g" | "GiB" | "Gi" | "gib" => 1 << 30,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => return Err(bad()),
    };
    let bytes = n
        .checked_mul(mult)
        .ok_or_else(|| ParseError::new(format!("size '{text}' is too large")))?;
    if bytes == 0 {
        return Err(ParseError::new(format!(
            "bad size '{text}': a message size must be at least 1 byte"
        )));
    }
    Ok(bytes)
}

/// Parses a comma-separated list of sizes, or a range `MIN..MAX` stepping by powers of two.
pub fn parse_size_list(text: &str) -> Result<Vec<u64>, ParseError> {
    if let Some((lo, hi)) = text.split_once("..") {
        let (lo, hi) = (parse_size(lo)?, parse_size(hi)?);
        if lo > hi {
            return Err(ParseError::new(format!(
                "bad size range '{text}': the first size must not exceed the second"
            )));
        }
        let mut sizes = Vec::new();
        let mut s = lo;
        while s < hi {
            sizes.push(s);
            s = s.saturating_mul(2);
        }
        sizes.push(hi);
        return Ok(sizes);
    }
    let sizes: Vec<u64> = text
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(parse_size)
        .collect::<Result<_, _>>()?;
    if sizes.is_empty() {
        return Err(ParseError::new(
            "no message sizes given: use e.g. --sizes 8,4KiB,64MiB or 8..64MiB",
        ));
    }
    Ok(sizes)
}

/// The default sweep: 8 B … 64 MiB in powers of four, plus 4 KiB and 4 MiB landmarks.
pub fn default_sizes() -> Vec<u64> {
    let mut v: Vec<u64> = (0..).map(|i| 8u64 << (2 * i)).take_while(|&s| s <= 64 << 20).collect();
    for s in [4 << 10, 4 << 20, 64 << 20] {
        if !v.contains(&s) {
            v.push(s);
        }
    }
    v.sort_unstable();
    v
}

/// Formats bytes with a binary suffix: `8 B`, `4 KiB`, `64 MiB`, `1.5 MiB`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (name, div) in UNITS {
        if bytes >= div {
            return if bytes.is_multiple_of(div) {
                format!("{} {name}", bytes / div)
            } else {
                format!("{:.1} {name}", bytes as f64 / div as f64)
            };
        }
    }
    format!("{bytes} B")
}

/// A duration as error lines and notes say it: `250ms` under a second, `30s`, `1.5s`.
pub fn format_duration(d: std::time::Duration) -> String {
    if d < std::time::Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// A bandwidth in `unit`, without the unit: two decimals, or three significant digits below 1 so
/// a slow path reads `0.00372`, never `0.00`. The one rule for every output (tables, verdict
/// reasons, labels, progress).
pub fn bandwidth_value(bytes_per_s: f64, unit: crate::model::BandwidthUnit) -> String {
    let v = unit.from_bytes_per_s(bytes_per_s);
    if v >= 1.0 || v == 0.0 || !v.is_finite() {
        format!("{v:.2}")
    } else {
        let decimals = (2 - v.log10().floor() as i32).clamp(2, 9) as usize;
        format!("{v:.decimals$}")
    }
}

/// [`bandwidth_value`] with its unit: `12.50 GB/s`, `0.00372 GB/s`.
pub fn format_bandwidth(bytes_per_s: f64, unit: crate::model::BandwidthUnit) -> String {
    format!("{} {}", bandwidth_value(bytes_per_s, unit), unit.label())
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations_read_as_error_lines_say_them() {
        use std::time::Duration;
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(format_duration(Duration::from_secs(30)), "30s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
    }

    use super::*;

    #[test]
    fn parses_binary_and_decimal_suffixes() {
        assert_eq!(parse_size("8").unwrap(), 8);
        assert_eq!(parse_size("4KiB").unwrap(), 4096);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("1GB").unwrap(), 1_000_000_000);
        assert_eq!(parse_size(" 10kB ").unwrap(), 10_000);
    }

    #[test]
    fn rejects_zero_garbage_and_overflow() {
        assert!(parse_size("0").unwrap_err().to_string().contains("at least 1 byte"));
        assert!(parse_size("").is_err());
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("4XB").unwrap_err().to_string().contains("4XB"));
        assert!(parse_size("99999999999999999999G").is_err());
        assert!(parse_size("17179869184G").is_err());
    }

    #[test]
    fn lists_and_ranges() {
        assert_eq!(parse_size_list("8,4KiB").unwrap(), vec![8, 4096]);
        assert_eq!(parse_size_list("1K..4K").unwrap(), vec![1024, 2048, 4096]);
        assert_eq!(parse_size_list("1K..3K").unwrap(), vec![1024, 2048, 3072]);
        assert!(parse_size_list("4K..1K").is_err());
        assert!(parse_size_list(",").is_err());
    }

    #[test]
    fn default_sweep_spans_8_bytes_to_64_mib() {
        let s = default_sizes();
        assert_eq!(s.first(), Some(&8));
        assert_eq!(s.last(), Some(&(64 << 20)));
        assert!(s.contains(&4096) && s.contains(&(4 << 20)));
        assert!(s.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn formats_sizes() {
        assert_eq!(format_size(8), "8 B");
        assert_eq!(format_size(4096), "4 KiB");
        assert_eq!(format_size(64 << 20), "64 MiB");
        assert_eq!(format_size(1536 << 10), "1.5 MiB");
    }
}
