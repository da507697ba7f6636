//! Kubernetes resource quantities (`"8"`, `"500m"`, `"64Gi"`, `"1e3"`) as integer milli-units, so
//! the scheduler can add and compare them exactly.

/// Milli-units of `text`, or `None` when it is not a quantity.
pub fn parse_milli(text: &str) -> Option<i128> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    if number.is_empty() {
        return None;
    }
    let (mantissa, exponent): (&str, i32) = match suffix {
        "" => (number, 0),
        "m" => (number, -3),
        "k" => (number, 3),
        "M" => (number, 6),
        "G" => (number, 9),
        "T" => (number, 12),
        "P" => (number, 15),
        "E" => (number, 18),
        s if s.starts_with(['e', 'E']) => (number, s[1..].parse().ok()?),
        _ => {
            let power = match suffix {
                "Ki" => 10,
                "Mi" => 20,
                "Gi" => 30,
                "Ti" => 40,
                "Pi" => 50,
                "Ei" => 60,
                _ => return None,
            };
            return Some(decimal_milli(number, 0)? << power);
        }
    };
    decimal_milli(mantissa, exponent)
}

/// `number × 10^exponent × 1000`, rounded up like Kubernetes rounds requests.
fn decimal_milli(number: &str, exponent: i32) -> Option<i128> {
    let negative = number.starts_with('-');
    let digits = number.trim_start_matches(['+', '-']);
    let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    let all: String = format!("{int_part}{frac_part}");
    if !all.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let mut value: i128 = if all.is_empty() { 0 } else { all.parse().ok()? };
    let mut scale = exponent + 3 - frac_part.len() as i32;
    while scale > 0 {
        value = value.checked_mul(10)?;
        scale -= 1;
    }
    while scale < 0 {
        let rem = value % 10;
        value = value / 10 + i128::from(rem != 0);
        scale += 1;
    }
    Some(if negative { -value } else { value })
}

/// Milli-units back to the shortest usual text (`8000` → `"8"`, `500` → `"500m"`).
pub fn format_milli(milli: i128) -> String {
    if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_usual_forms() {
        assert_eq!(parse_milli("8"), Some(8000));
        assert_eq!(parse_milli("500m"), Some(500));
        assert_eq!(parse_milli("1.5"), Some(1500));
        assert_eq!(parse_milli("1Ki"), Some(1024 * 1000));
        assert_eq!(parse_milli("2G"), Some(2_000_000_000_000));
        assert_eq!(parse_milli("1e3"), Some(1_000_000));
        assert_eq!(parse_milli("abc"), None);
        assert_eq!(parse_milli("1Xi"), None);
        assert_eq!(format_milli(8000), "8");
        assert_eq!(format_milli(250), "250m");
    }
}
