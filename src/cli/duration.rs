//! Durations on the command line: `500ms`, `5s`, `1.5s`, `2m`, `1h`. A bare
//! number is milliseconds (what the API takes, and what these options meant
//! before units existed). The one parser every duration option uses.

use super::CliError;
use std::time::Duration;

/// Parses a duration; `what` names the option in the error.
pub fn parse(text: &str, what: &str) -> Result<Duration, CliError> {
    parse_str(text).map_err(|why| {
        CliError::usage(format!(
            "{what} takes a duration like 500ms, 5s, 2m or 1h (a bare number is milliseconds), got {text:?}: {why}"
        ))
    })
}

/// Parses a duration into whole milliseconds, as the API wants them.
pub fn parse_ms(text: &str, what: &str) -> Result<u64, CliError> {
    Ok(parse(text, what)?.as_millis().min(u128::from(u64::MAX)) as u64)
}

fn parse_str(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    if number.is_empty() {
        return Err("no number".into());
    }
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{number:?} is not a number"))?;
    let ms_per = match unit {
        "" | "ms" => 1.0,
        "s" | "sec" => 1e3,
        "m" | "min" => 60e3,
        "h" => 3600e3,
        other => return Err(format!("unknown unit {other:?} (use ms, s, m or h)")),
    };
    let ms = value * ms_per;
    if !ms.is_finite() || ms > 1e15 {
        return Err("too large".into());
    }
    Ok(Duration::from_micros((ms * 1000.0).round() as u64))
}

#[cfg(test)]
mod tests {
    use super::parse_str;
    use std::time::Duration;

    #[test]
    fn units_and_bare_milliseconds() {
        let ms = Duration::from_millis;
        assert_eq!(parse_str("500ms"), Ok(ms(500)));
        assert_eq!(parse_str("500"), Ok(ms(500)));
        assert_eq!(parse_str("5s"), Ok(ms(5000)));
        assert_eq!(parse_str("1.5s"), Ok(ms(1500)));
        assert_eq!(parse_str("2m"), Ok(ms(120_000)));
        assert_eq!(parse_str("1h"), Ok(ms(3_600_000)));
        assert_eq!(parse_str("0"), Ok(ms(0)));
    }

    #[test]
    fn nonsense_is_refused() {
        for bad in ["", "s", "5x", "-5s", "1..2s", "5 s s", "1e9h9"] {
            assert!(parse_str(bad).is_err(), "{bad:?} parsed");
        }
    }
}
