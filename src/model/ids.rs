//! Typed ids. On the wire, in snapshots and in the handoff manifest an id is
//! a one-letter prefix and a number (`p3`, `t2`, `w1`); in memory it is a
//! `u64` that cannot be mixed up with another kind of id.
//!
//! Ids are handed out by counters that only go forward, also across
//! restarts, so an id never names two things. [`PaneId::next`] and its
//! siblings cannot wrap: the last value, `u64::MAX`, is never a valid id
//! (parsing refuses it), so a counter that reaches it is exhausted instead
//! of handing out an id twice.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// Why a string is not an id of the wanted kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdError {
    /// "pane", "tab" or "workspace".
    pub kind: &'static str,
    pub text: String,
}

impl fmt::Display for IdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not a {} id", self.text, self.kind)
    }
}

impl std::error::Error for IdError {}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(u64);

        impl $name {
            /// The letter before the number on the wire.
            pub const PREFIX: char = $prefix;
            /// The first id a fresh counter hands out.
            pub const FIRST: $name = $name(1);

            /// The id with this number. `u64::MAX` is no id (see the
            /// module doc); callers get numbers from a counter or a parse.
            pub const fn new(n: u64) -> $name {
                $name(n)
            }

            pub const fn get(self) -> u64 {
                self.0
            }

            /// The id after this one, or `None` when the ids are used up.
            pub fn next(self) -> Option<$name> {
                self.0
                    .checked_add(1)
                    .filter(|n| *n < u64::MAX)
                    .map($name)
            }
        }

        impl fmt::Display for $name {
            /// `p3`; honours width and alignment (`{:<5}`) like a string.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(&format!("{}{}", $prefix, self.0))
            }
        }

        impl FromStr for $name {
            type Err = IdError;

            /// `"p12"` → 12: the prefix, then decimal digits only (no sign,
            /// no spaces), below `u64::MAX`.
            fn from_str(s: &str) -> Result<$name, IdError> {
                let err = || IdError {
                    kind: $kind,
                    text: s.to_string(),
                };
                let digits = s.strip_prefix($prefix).ok_or_else(err)?;
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(err());
                }
                match digits.parse::<u64>() {
                    Ok(n) if n < u64::MAX => Ok($name(n)),
                    _ => Err(err()),
                }
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                let text = String::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

id_type!(
    /// A pane: `p3`.
    PaneId, 'p', "pane"
);
id_type!(
    /// A tab: `t2`.
    TabId, 't', "tab"
);
id_type!(
    /// A workspace: `w1`.
    WorkspaceId, 'w', "workspace"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_parse_round_trip() {
        assert_eq!(PaneId::new(3).to_string(), "p3");
        assert_eq!(TabId::new(2).to_string(), "t2");
        assert_eq!(WorkspaceId::new(1).to_string(), "w1");
        assert_eq!(format!("[{:<4}]", PaneId::new(3)), "[p3  ]");
        assert_eq!("p12".parse::<PaneId>(), Ok(PaneId::new(12)));
        assert_eq!("t0".parse::<TabId>(), Ok(TabId::new(0)));
    }

    #[test]
    fn parse_refuses_other_kinds_and_junk() {
        for bad in [
            "", "p", "3", "t3", "P3", "p+3", "p-3", "p 3", "p3 ", "p3x", "p٣",
        ] {
            let err = bad.parse::<PaneId>().unwrap_err();
            assert_eq!(err.kind, "pane", "{bad:?}");
            assert_eq!(err.to_string(), format!("{bad:?} is not a pane id"));
        }
        assert!("w3".parse::<TabId>().is_err());
        assert!("p18446744073709551616".parse::<PaneId>().is_err());
        // The last value is kept back so a counter can never wrap onto it.
        assert!("p18446744073709551615".parse::<PaneId>().is_err());
        assert!("p18446744073709551614".parse::<PaneId>().is_ok());
    }

    #[test]
    fn next_never_wraps() {
        assert_eq!(PaneId::new(1).next(), Some(PaneId::new(2)));
        assert_eq!(
            PaneId::new(u64::MAX - 2).next(),
            Some(PaneId::new(u64::MAX - 1))
        );
        assert_eq!(PaneId::new(u64::MAX - 1).next(), None);
        assert_eq!(PaneId::new(u64::MAX).next(), None);
    }

    #[test]
    fn serde_uses_the_wire_strings() {
        assert_eq!(serde_json::to_string(&PaneId::new(7)).unwrap(), "\"p7\"");
        let id: WorkspaceId = serde_json::from_str("\"w4\"").unwrap();
        assert_eq!(id, WorkspaceId::new(4));
        let err = serde_json::from_str::<TabId>("\"p4\"").unwrap_err();
        assert!(err.to_string().contains("\"p4\" is not a tab id"), "{err}");
        assert!(serde_json::from_str::<TabId>("4").is_err());
    }
}
