//! Fault injection for tests: make either side of an upgrade die or stall at
//! a named step, so every rollback edge can be proven. Set by the hidden
//! `fault` param of `server.upgrade` (`ptyd upgrade --fault STEP:ACTION`),
//! which reaches the new process as `PTYD_FAULT`. Documented as for testing
//! only; with nothing set these checks cost a string compare.
//!
//! Compiled only into debug builds and builds with the `fault-injection`
//! cargo feature (`handoff/mod.rs` has the release stand-in, which refuses
//! the parameter): a release server cannot be made to exit or stall by a
//! request.
//!
//! Steps: new side `new-before-hello`, `new-after-manifest`,
//! `new-mid-batches`, `new-before-imported`, `new-before-committed`,
//! `new-after-committed`; old side `old-after-hello`, `old-after-transfer`.
//! Actions: `exit` (the process exits at once with code 97) or `stall`
//! (it stops answering: sleeps for an hour).

/// Environment variable carrying `STEP:ACTION` to the new process.
pub const FAULT_ENV: &str = "PTYD_FAULT";
/// Whether this build has fault points.
pub const COMPILED_IN: bool = true;

/// The `fault` parameter of `server.upgrade`, accepted as given.
pub fn accept(spec: Option<String>) -> Result<Option<String>, String> {
    super::accept_fault(spec, COMPILED_IN)
}

/// Acts on `spec` (`STEP:ACTION`) if it names `step`.
pub fn check(spec: Option<&str>, step: &str) {
    let Some(spec) = spec else { return };
    let Some((at, action)) = spec.split_once(':') else {
        return;
    };
    if at != step {
        return;
    }
    crate::service::journal::write_line(&format!(
        "ptyd[{}]: fault injection: {action} at {step}",
        std::process::id()
    ));
    match action {
        "exit" => std::process::exit(97),
        "stall" => std::thread::sleep(std::time::Duration::from_secs(3600)),
        _ => {}
    }
}

/// The new side's fault, from its environment.
pub fn from_env() -> Option<String> {
    std::env::var(FAULT_ENV).ok().filter(|s| !s.is_empty())
}
