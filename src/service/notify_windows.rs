//! Windows has no `sd_notify` to speak to: the same calls as `notify.rs`,
//! doing nothing, so callers need no `cfg`.

pub fn notify(_state: &str) {}

pub fn ready(_status: &str) {}

pub fn stopping() {}
