//! Windows' side of `rebind.rs`: a named pipe has no file to remove, so
//! there is nothing to check or make again.

use super::Server;
use serde_json::Value;

/// Nothing to report: always `null` in `server.status`.
#[derive(Debug, Default)]
pub struct Rebinds;

impl Rebinds {
    pub fn status(&self) -> Value {
        Value::Null
    }
}

impl Server {
    pub(super) fn schedule_namespace_check(&mut self) {}

    pub(super) fn on_namespace_check_timer(&mut self) {}

    pub(super) fn check_namespace(&mut self, _why: &str) {}
}
