//! Timestamps and durations as the published traces write them: `2017-10-03 02:02:59` (Philly, Helios),
//! `2023-06-01 00:00:13+08:00` (Acme), `2024-01-01T10:00:00` (sacct), Unix seconds (PAI), and Slurm's
//! `[D-]HH:MM:SS` elapsed times. A time without a zone is read as UTC: only differences between a trace's
//! own times matter, and a trace writes all of them in one zone.

use chrono::{DateTime, NaiveDateTime};

/// Seconds since the Unix epoch of a timestamp, or `None` when `text` is not one. Empty fields and the
/// placeholders traces use for "never" (`None`, `null`, `Unknown`, `\N`, `NaN`) are `Some(None)`.
pub fn parse_time(text: &str) -> Option<Option<f64>> {
    let t = text.trim();
    if is_missing(t) {
        return Some(None);
    }
    if let Ok(x) = t.parse::<f64>() {
        return x.is_finite().then_some(Some(x));
    }
    // Date and time may be joined by a space or a `T`; chrono's RFC 3339 reader wants the `T`.
    let joined: String = match t.as_bytes().get(10) {
        Some(b' ') => format!("{}T{}", &t[..10], &t[11..]),
        _ => t.to_string(),
    };
    if let Ok(d) = DateTime::parse_from_rfc3339(&joined) {
        return Some(Some(seconds(d.timestamp(), d.timestamp_subsec_nanos())));
    }
    for fmt in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"] {
        if let Ok(d) = NaiveDateTime::parse_from_str(&joined, fmt) {
            let d = d.and_utc();
            return Some(Some(seconds(d.timestamp(), d.timestamp_subsec_nanos())));
        }
    }
    // An offset without a colon (`+0800`).
    if let Ok(d) = DateTime::parse_from_str(&joined, "%Y-%m-%dT%H:%M:%S%.f%z") {
        return Some(Some(seconds(d.timestamp(), d.timestamp_subsec_nanos())));
    }
    None
}

/// Whether a field holds one of the placeholders traces write for a missing value.
pub fn is_missing(t: &str) -> bool {
    matches!(
        t,
        "" | "None" | "none" | "null" | "NULL" | "Unknown" | "\\N" | "NaN" | "nan" | "N/A"
    )
}

fn seconds(secs: i64, nanos: u32) -> f64 {
    secs as f64 + nanos as f64 * 1e-9
}

/// Seconds of a Slurm elapsed time: `[D-]HH:MM:SS`, `MM:SS` or `MM:SS.mmm`, or plain seconds.
pub fn parse_elapsed(text: &str) -> Option<f64> {
    let t = text.trim();
    if let Ok(x) = t.parse::<f64>() {
        return (x.is_finite() && x >= 0.0).then_some(x);
    }
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (d.parse::<u64>().ok()?, r),
        None => (0, t),
    };
    let parts: Vec<&str> = rest.split(':').collect();
    let num = |s: &str| s.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0);
    let (h, m, s) = match parts[..] {
        [h, m, s] => (num(h)?, num(m)?, num(s)?),
        [m, s] if days == 0 => (0.0, num(m)?, num(s)?),
        _ => return None,
    };
    if m >= 60.0 || s >= 60.0 {
        return None;
    }
    Some(days as f64 * 86_400.0 + h * 3_600.0 + m * 60.0 + s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_published_style_reads_to_the_same_instant() {
        let utc = 1_506_996_179.0; // 2017-10-03 02:02:59 UTC
        assert_eq!(parse_time("2017-10-03 02:02:59"), Some(Some(utc)));
        assert_eq!(parse_time("2017-10-03T02:02:59"), Some(Some(utc)));
        assert_eq!(parse_time("2017-10-03 10:02:59+08:00"), Some(Some(utc)));
        assert_eq!(parse_time("2017-10-03T02:02:59Z"), Some(Some(utc)));
        assert_eq!(parse_time("2017-10-03 10:02:59+0800"), Some(Some(utc)));
        assert_eq!(parse_time("1506996179"), Some(Some(utc)));
        assert_eq!(parse_time("2017-10-03 02:02:59.5"), Some(Some(utc + 0.5)));
        for missing in ["", "None", "Unknown", "\\N", " null "] {
            assert_eq!(parse_time(missing), Some(None), "{missing}");
        }
        for bad in [
            "yesterday",
            "2017-13-03 02:02:59",
            "2017-10-03 25:00:00",
            "inf",
        ] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn slurm_elapsed_times() {
        assert_eq!(parse_elapsed("00:01:05"), Some(65.0));
        assert_eq!(
            parse_elapsed("2-03:00:00"),
            Some(2.0 * 86400.0 + 3.0 * 3600.0)
        );
        assert_eq!(parse_elapsed("01:05.250"), Some(65.25));
        assert_eq!(parse_elapsed("17"), Some(17.0));
        for bad in ["", "1:2:3:4", "00:61:00", "x-00:00:01", "-5"] {
            assert_eq!(parse_elapsed(bad), None, "{bad}");
        }
    }
}
