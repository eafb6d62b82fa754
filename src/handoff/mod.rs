//! Live upgrade: handing every PTY, the listener and every client to a new
//! server binary over a private `SOCK_SEQPACKET` socketpair. This module is
//! the wire side only (messages, manifest, fd names, fd batches, fault
//! injection); the server side of the sequence is `server/continuity/upgrade/`.
//! ARCHITECTURE.md and docs/design/upgrade.md have the state machine.

#[cfg(any(debug_assertions, feature = "fault-injection"))]
pub mod fault;
pub mod fd_name;
// Fd passing (`SCM_RIGHTS`): Unix only, as the live upgrade is.
#[cfg(unix)]
pub mod fdpass;
pub mod manifest;

/// Names the new server's end of the handoff socketpair (an fd number it
/// inherited). Its presence puts `ptyd server` in import mode.
pub const HANDOFF_FD_ENV: &str = "PTYD_HANDOFF_FD";

/// Release builds without the `fault-injection` feature: no fault point
/// exists, so no request can make a server exit or stall on purpose.
/// `check` is a no-op, the environment is never read, and `accept` refuses
/// every `fault` parameter.
#[cfg(not(any(debug_assertions, feature = "fault-injection")))]
pub mod fault {
    /// Still named so that a server never passes a stray one on.
    pub const FAULT_ENV: &str = "PTYD_FAULT";
    /// Whether this build has fault points.
    pub const COMPILED_IN: bool = false;

    pub fn check(_spec: Option<&str>, _step: &str) {}

    pub fn from_env() -> Option<String> {
        None
    }

    pub fn accept(spec: Option<String>) -> Result<Option<String>, String> {
        super::accept_fault(spec, COMPILED_IN)
    }
}

/// The `fault` parameter of `server.upgrade`, checked: refused with a
/// clear reason when this build has no fault points.
pub fn accept_fault(spec: Option<String>, compiled_in: bool) -> Result<Option<String>, String> {
    match spec {
        Some(spec) if !compiled_in => Err(format!(
            "fault {spec:?}: fault injection is compiled out of this build (a release build \
             without the `fault-injection` cargo feature); it exists for tests only"
        )),
        spec => Ok(spec),
    }
}

#[cfg(test)]
mod tests {
    use super::accept_fault;

    #[test]
    fn a_fault_is_refused_where_fault_injection_is_compiled_out() {
        let err = accept_fault(Some("old-after-hello:stall".into()), false).unwrap_err();
        assert!(err.contains("compiled out"), "{err}");
        assert_eq!(accept_fault(None, false), Ok(None));
        assert_eq!(
            accept_fault(Some("new-before-hello:exit".into()), true),
            Ok(Some("new-before-hello:exit".into()))
        );
    }

    #[test]
    fn fault_points_exist_exactly_in_debug_and_feature_builds() {
        let expected = cfg!(any(debug_assertions, feature = "fault-injection"));
        assert_eq!(super::fault::COMPILED_IN, expected);
        // `cargo test` builds with debug assertions: the fault points the
        // upgrade tests rely on are there.
        assert!(super::fault::accept(Some("new-mid-batches:exit".into())).is_ok() == expected);
    }
}
