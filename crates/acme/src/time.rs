//! RFC 3339 timestamps from the CA (renewal windows) to Unix seconds, and back for logs.

/// Unix seconds of an RFC 3339 date-time (`2025-01-02T03:04:05.678Z`, `...+01:00`); None when
/// malformed. Fractions are dropped.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes().all(|c| c.is_ascii_digit()).then(|| t.parse().ok())?
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, min, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let rb = rest.as_bytes();
            if rb.len() != 6 || !matches!(rb[0], b'+' | b'-') || rb[3] != b':' {
                return None;
            }
            let (h, m) = (num_in(rest, 1..3)?, num_in(rest, 4..6)?);
            let sign = if rb[0] == b'-' { -1 } else { 1 };
            sign * (h * 3600 + m * 60)
        }
    };
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3600 + min * 60 + sec - offset)
}

/// Unix seconds of an HTTP date in IMF-fixdate form (`Sun, 06 Nov 1994 08:49:37 GMT`, RFC 9110
/// §5.6.7), as `Retry-After` may carry; None when malformed.
pub fn parse_http_date(s: &str) -> Option<i64> {
    let rest = s.get(5..)?;
    if !s.is_char_boundary(5) || s.get(3..5) != Some(", ") || !rest.ends_with(" GMT") || rest.len() != 24 {
        return None;
    }
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| rest.get(3..6) == Some(*m))? as i64 + 1;
    let iso = format!(
        "{}-{month:02}-{}T{}Z",
        rest.get(7..11)?,
        rest.get(0..2)?,
        rest.get(12..20)?
    );
    if rest.get(2..3) != Some(" ") || rest.get(6..7) != Some(" ") || rest.get(11..12) != Some(" ") {
        return None;
    }
    parse_rfc3339(&iso)
}

fn num_in(s: &str, r: std::ops::Range<usize>) -> Option<i64> {
    let t = s.get(r)?;
    t.bytes().all(|c| c.is_ascii_digit()).then(|| t.parse().ok())?
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Unix seconds now.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

#[cfg(test)]
mod tests {
    use super::parse_rfc3339;

    #[test]
    fn parses_utc_offsets_and_fractions() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339("2025-01-02T03:04:05Z"), Some(1_735_787_045));
        assert_eq!(parse_rfc3339("2025-01-02T03:04:05.123456789Z"), Some(1_735_787_045));
        assert_eq!(parse_rfc3339("2025-01-02T04:04:05+01:00"), Some(1_735_787_045));
        assert_eq!(parse_rfc3339("2024-02-29T00:00:00Z"), Some(1_709_164_800));
    }

    #[test]
    fn http_dates() {
        use super::parse_http_date;
        assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:01:00 GMT"), Some(60));
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), Some(784_111_777));
        for bad in [
            "",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun,06 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:3x GMT",
            "Sünn 06 Nov 1994 08:49:37 GMT",
            "Sun, 06-Nov-1994 08:49:37 GMT",
        ] {
            assert_eq!(parse_http_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn refuses_malformed() {
        for bad in [
            "",
            "2025-01-02",
            "2025-13-02T03:04:05Z",
            "2025-01-02T03:04:05",
            "2025-01-02T03:04:05.Z",
            "2025-01-02T03:04:05+0100",
            "２025-01-02T03:04:05Z",
            "2025-01-02T03:04:05ZZ",
            "+025-01-02T03:04:05Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}
