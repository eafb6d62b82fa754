//! Waiting with a deadline: the one polling loop of the harness.
//!
//! Tests wait on what the server reports (`pane.wait`, events, EXIT frames)
//! wherever it reports something. [`eventually`] is for the rest, which
//! tells nobody when it changes: a foreign process dying, a file appearing,
//! fd counts in `/proc`, tmux's screen. It fails the test with a message
//! naming what was awaited and, where the check can say, what it saw last.

use std::fmt::Display;
use std::time::{Duration, Instant};

/// The overall bound on anything a test waits for. Generous: the suite must
/// pass on a loaded two-core machine.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// What a check passed to [`eventually`] returns: `bool` (done or not),
/// `Option<T>` (the value once there) or `Result<T, String>` (the value, or
/// what the check saw instead, quoted in the failure).
pub trait Check {
    type Done;
    /// `Ok` once done; otherwise what was seen, if the check says.
    fn outcome(self) -> Result<Self::Done, Option<String>>;
}

impl Check for bool {
    type Done = ();
    fn outcome(self) -> Result<(), Option<String>> {
        if self { Ok(()) } else { Err(None) }
    }
}

impl<T> Check for Option<T> {
    type Done = T;
    fn outcome(self) -> Result<T, Option<String>> {
        self.ok_or(None)
    }
}

impl<T> Check for Result<T, String> {
    type Done = T;
    fn outcome(self) -> Result<T, Option<String>> {
        self.map_err(Some)
    }
}

/// Runs `check` until it is done, failing the test after [`TIMEOUT`] with
/// "timed out … waiting for `what`" and the last thing the check saw.
#[track_caller]
pub fn eventually<C: Check>(what: impl Display, check: impl FnMut() -> C) -> C::Done {
    eventually_within(TIMEOUT, what, check)
}

/// [`eventually`] with another bound than [`TIMEOUT`].
#[track_caller]
pub fn eventually_within<C: Check>(
    timeout: Duration,
    what: impl Display,
    mut check: impl FnMut() -> C,
) -> C::Done {
    let mut seen = None;
    let done = poll_until(timeout, || match check().outcome() {
        Ok(done) => Some(done),
        Err(last) => {
            seen = last;
            None
        }
    });
    match (done, seen) {
        (Some(done), _) => done,
        (None, None) => panic!("timed out after {timeout:?} waiting for {what}"),
        (None, Some(seen)) => {
            panic!("timed out after {timeout:?} waiting for {what}; last seen: {seen}")
        }
    }
}

/// Runs `check` until it returns `Some` or `timeout` passed (`None`), at
/// least once. Pauses start short (most conditions hold within a few
/// milliseconds) and grow to 50 ms.
pub fn poll_until<T>(timeout: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(2);
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}
