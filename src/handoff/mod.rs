//! Live upgrade: handing every PTY, the listener and every client to a new
//! server binary. This module grows with issue 5; for now it holds the fd
//! transfer primitive the sequence is built on.

pub mod fdpass;
