//! Wall-clock time as the snapshot, the status replies and file names
//! record it: milliseconds since the Unix epoch.

/// Milliseconds since the Unix epoch; 0 if the clock is before 1970.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `HH:MM:SS` (UTC) of a Unix time in milliseconds, for marks written
/// into a pane's scrollback.
pub fn hh_mm_ss_utc(unix_ms: u64) -> String {
    let s = unix_ms / 1000 % 86_400;
    format!("{:02}:{:02}:{:02} UTC", s / 3600, s / 60 % 60, s % 60)
}
