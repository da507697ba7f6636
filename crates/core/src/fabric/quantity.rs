//! Kubernetes resource quantities (`"8"`, `"500m"`, `"64Gi"`, `"1.5G"`, `"1e3"`), read exactly
//! as integer milli-units (no floating point), so sizes and counts can be added and compared.

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
    let binary_power = match suffix {
        "Ki" => Some(10),
        "Mi" => Some(20),
        "Gi" => Some(30),
        "Ti" => Some(40),
        "Pi" => Some(50),
        "Ei" => Some(60),
        _ => None,
    };
    if let Some(power) = binary_power {
        return decimal_milli(number, 0)?.checked_mul(1i128 << power);
    }
    let exponent: i32 = match suffix {
        "" => 0,
        "m" => -3,
        "k" => 3,
        "M" => 6,
        "G" => 9,
        "T" => 12,
        "P" => 15,
        "E" => 18,
        // Scientific notation (`1e3`), bounded so the result stays an i128.
        s if s.starts_with(['e', 'E']) => s[1..].parse().ok().filter(|e: &i32| e.abs() <= 30)?,
        _ => return None,
    };
    decimal_milli(number, exponent)
}

/// `number × 10^exponent × 1000`, rounded up like Kubernetes rounds requests.
fn decimal_milli(number: &str, exponent: i32) -> Option<i128> {
    let negative = number.starts_with('-');
    let digits = number.strip_prefix(['+', '-']).unwrap_or(number);
    let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    let all = format!("{int_part}{frac_part}");
    if !all.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let mut value: i128 = all.parse().ok()?;
    let mut scale = exponent + 3 - i32::try_from(frac_part.len()).ok()?;
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

/// A quantity of bytes (`16Gi`, `80G`, `512Mi`, `1e9`), rounded up to a whole byte; `None` when
/// it is not a quantity, negative, or does not fit.
pub fn parse_bytes(text: &str) -> Option<u64> {
    let milli = parse_milli(text)?;
    if milli < 0 {
        return None;
    }
    u64::try_from((milli + 999) / 1000).ok()
}
