//! The name each fd carries in a handoff message. Every fd travels named,
//! never by position alone; the old side builds the names and the new side
//! takes them apart, so both do it through this one type. On the wire a
//! name is the same string it always was (`pty:p3`), so adding this type
//! did not change [`super::manifest::HANDOFF_VERSION`].

use crate::model::PaneId;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// One handed-over fd, by what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FdName {
    /// The listening socket (`listener`), with the pre-copy.
    Listener,
    /// `ptyd.lock`, whose flock travels with the open file (`lock`).
    Lock,
    /// The write end of the reaper's lineage pipe (`lineage`).
    Lineage,
    /// A pane's PTY master (`pty:pN`), by pane number.
    Pty(u64),
    /// A pane's hung-up master kept for its last output (`ptyhup:pN`).
    PtyHangup(u64),
    /// A pidfd of a pane's running process (`pidfd:pN`).
    Pidfd(u64),
    /// A client connection (`conn:N`), by the old server's connection id.
    Conn(usize),
    /// A pane's raw-output ring (`ring:pN`, a memfd the keeper holds too;
    /// see `server/continuity/output_ring.rs`).
    Ring(u64),
    /// The history log (`history_log`, a memfd the keeper holds with the
    /// checkpoint; see `server/continuity/history_log.rs`), with the pre-copy.
    HistoryLog,
}

impl fmt::Display for FdName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FdName::Listener => f.write_str("listener"),
            FdName::Lock => f.write_str("lock"),
            FdName::Lineage => f.write_str("lineage"),
            FdName::Pty(p) => write!(f, "pty:{}", PaneId::new(*p)),
            FdName::PtyHangup(p) => write!(f, "ptyhup:{}", PaneId::new(*p)),
            FdName::Pidfd(p) => write!(f, "pidfd:{}", PaneId::new(*p)),
            FdName::Conn(c) => write!(f, "conn:{c}"),
            FdName::Ring(p) => write!(f, "ring:{}", PaneId::new(*p)),
            FdName::HistoryLog => f.write_str("history_log"),
        }
    }
}

/// Digits only: `u64::from_str` would also take `+3`, a second spelling
/// of the same name.
fn number<T: FromStr>(text: &str) -> Option<T> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// The number of a pane id as the wire spells it (`p3`). Any u64, unlike
/// `PaneId`'s parse: a name only has to round-trip, not be a valid id.
fn pane(text: &str) -> Option<u64> {
    text.strip_prefix(PaneId::PREFIX).and_then(number)
}

impl FromStr for FdName {
    type Err = String;

    fn from_str(s: &str) -> Result<FdName, String> {
        let parsed = match s {
            "listener" => Some(FdName::Listener),
            "lock" => Some(FdName::Lock),
            "lineage" => Some(FdName::Lineage),
            "history_log" => Some(FdName::HistoryLog),
            _ => match s.split_once(':') {
                Some(("pty", p)) => pane(p).map(FdName::Pty),
                Some(("ptyhup", p)) => pane(p).map(FdName::PtyHangup),
                Some(("pidfd", p)) => pane(p).map(FdName::Pidfd),
                Some(("conn", c)) => number(c).map(FdName::Conn),
                Some(("ring", p)) => pane(p).map(FdName::Ring),
                _ => None,
            },
        };
        parsed.ok_or_else(|| format!("unknown fd name {s:?}"))
    }
}

impl Serialize for FdName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for FdName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<FdName, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::FdName;

    #[test]
    fn names_round_trip_as_the_strings_they_always_were() {
        for (name, text) in [
            (FdName::Listener, "listener"),
            (FdName::Lock, "lock"),
            (FdName::Lineage, "lineage"),
            (FdName::Pty(3), "pty:p3"),
            (FdName::PtyHangup(17), "ptyhup:p17"),
            (FdName::Pidfd(u64::MAX), "pidfd:p18446744073709551615"),
            (FdName::Conn(7), "conn:7"),
            (FdName::Ring(4), "ring:p4"),
            (FdName::HistoryLog, "history_log"),
        ] {
            assert_eq!(name.to_string(), text);
            assert_eq!(text.parse::<FdName>(), Ok(name));
            let json = serde_json::to_string(&name).unwrap();
            assert_eq!(json, format!("\"{text}\""));
            assert_eq!(serde_json::from_str::<FdName>(&json).unwrap(), name);
        }
    }

    #[test]
    fn unknown_or_malformed_names_are_refused() {
        for bad in [
            "",
            "listen",
            "pty:3",
            "pty:p",
            "pty:p-1",
            "pty:p+3",
            "pty:px",
            "conn:",
            "conn:p7",
            "pidfd:p1:2",
            "Lock",
            "pane:p1",
            "pty:p99999999999999999999",
        ] {
            assert!(bad.parse::<FdName>().is_err(), "{bad:?} parsed");
            let json = serde_json::to_string(bad).unwrap();
            let err = serde_json::from_str::<FdName>(&json).unwrap_err();
            assert!(
                err.to_string().contains("unknown fd name"),
                "{bad:?}: {err}"
            );
        }
    }
}
