//! The values of ic-bench's flags that are not bare numbers: durations, seconds, bandwidths, units
//! and size lists. One parser per kind, so every flag of a kind takes the same syntax and refuses
//! a bad value with the same one-line message (clap prints it after the flag's name).

use crate::BandwidthUnit;
use crate::ParseError;
use crate::units::parse_size_list;
use std::time::Duration;

/// `--sizes`: a list (8,4KiB,64MiB) or a power-of-two range (8..64MiB); sweep and gate take
/// several, comma separated or repeated, each a size or a range ([`SizeList::all`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeList(pub Vec<u64>);

impl SizeList {
    /// Parses one list or range.
    pub fn parse(text: &str) -> Result<SizeList, ParseError> {
        parse_size_list(text).map(SizeList)
    }

    /// Every size of `lists`, in order.
    pub fn all(lists: &[SizeList]) -> Vec<u64> {
        lists.iter().flat_map(|l| l.0.iter().copied()).collect()
    }
}

/// A number of seconds above zero (`--min-time 0.05`).
pub fn parse_positive_secs(text: &str) -> Result<f64, ParseError> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(ParseError::new(format!("'{text}' is not a positive number of seconds"))),
    }
}

/// A bandwidth flag in GB/s (10^9 B/s): a bare number, or a value with a unit as the
/// expectations file takes them (`10GB/s`, `10 GB/s`, `9000MiB/s`, `100Gb/s`).
pub fn parse_gbps(text: &str) -> Result<f64, ParseError> {
    if let Ok(v) = text.trim().parse::<f64>() {
        return Ok(v);
    }
    crate::verdict::parse_bandwidth(text).map(|bps| bps / 1e9)
}

/// `--unit`: gb (10^9 B/s) or mib (2^20 B/s).
pub fn parse_unit(text: &str) -> Result<BandwidthUnit, ParseError> {
    match text.to_ascii_lowercase().as_str() {
        "gb" | "gb/s" => Ok(BandwidthUnit::GBps),
        "mib" | "mib/s" => Ok(BandwidthUnit::MiBps),
        _ => Err(ParseError::new(format!(
            "'{text}' is not a unit: use gb (10^9 B/s) or mib (2^20 B/s)"
        ))),
    }
}

/// The one duration parser for every deadline and timeout flag: `10s`, `1m30s`, `500ms`, or a bare
/// number of seconds; zero and negative durations are refused with the same message everywhere.
pub fn parse_duration(text: &str) -> Result<Duration, ParseError> {
    match parse_interval(text)? {
        d if d.is_zero() => Err(not_positive(text)),
        d => Ok(d),
    }
}

/// The same syntax for the few flags where zero means "not at all" (e.g. `--counter-interval 0s`).
pub fn parse_interval(text: &str) -> Result<Duration, ParseError> {
    let t = text.trim();
    if let Ok(secs) = t.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|_| not_positive(text));
    }
    humantime::parse_duration(t)
        .map_err(|e| ParseError::new(format!("'{text}' is not a duration ({e}): use e.g. 10s, 2m, 500ms")))
}

fn not_positive(text: &str) -> ParseError {
    ParseError::new(format!("'{text}' is not a positive duration: use e.g. 10s, 2m, 500ms"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_duration_parser_for_every_flag() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("0.5"), Ok(Duration::from_millis(500)));
        for zero in ["0", "0s", "-1", "0.0"] {
            let e = parse_duration(zero).unwrap_err().to_string();
            assert!(e.contains("is not a positive duration"), "{zero}: {e}");
        }
        assert!(
            parse_duration("soon")
                .unwrap_err()
                .to_string()
                .contains("is not a duration")
        );
        assert_eq!(parse_interval("0s"), Ok(Duration::ZERO));
        assert!(parse_interval("-1").is_err());
    }

    #[test]
    fn bandwidth_flags_take_units_like_the_expectations_file() {
        assert_eq!(parse_gbps("10"), Ok(10.0));
        assert_eq!(parse_gbps("10GB/s"), Ok(10.0));
        assert_eq!(parse_gbps("10 GB/s"), Ok(10.0));
        assert_eq!(parse_gbps("100Gb/s"), Ok(12.5));
        assert!(
            parse_gbps("10 furlongs")
                .unwrap_err()
                .to_string()
                .contains("e.g. 10 GB/s")
        );
    }

    #[test]
    fn seconds_units_and_size_lists() {
        assert_eq!(parse_positive_secs("0.05"), Ok(0.05));
        for bad in ["0", "-1", "inf", "soon"] {
            assert_eq!(
                parse_positive_secs(bad).unwrap_err().to_string(),
                format!("'{bad}' is not a positive number of seconds")
            );
        }
        assert_eq!(parse_unit("MiB/s"), Ok(BandwidthUnit::MiBps));
        assert!(parse_unit("kb").unwrap_err().to_string().contains("use gb"));
        let lists = [SizeList::parse("8..32").unwrap(), SizeList::parse("1MiB").unwrap()];
        assert_eq!(SizeList::all(&lists), vec![8, 16, 32, 1 << 20]);
    }
}
