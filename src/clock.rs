//! Wall-clock time as the snapshot, the status replies and file names
//! record it: milliseconds since the Unix epoch.

/// Milliseconds since the Unix epoch; 0 if the clock is before 1970.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
