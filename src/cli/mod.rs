//! The command line: `ptyd [-L NAME] COMMAND [ARGS]`. Every command is
//! parsed by `args` from its entry in the table of `help/` (which also
//! renders its help, completions and man page), then run against the
//! server by its handler in a `cmd_*` file.
//!
//! Exit codes, one scheme for every command (also in `ptyd --help` and the
//! README):
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success |
//! | 1 | ptyd failed (no server, no such pane, the server refused) |
//! | 2 | usage error, found by the client or by the server (`invalid_params`) |
//! | 124 | a wait timed out, or a `run` pane's `--timeout` ended it |
//! | 126 | the program was found but could not be run (permission, format) |
//! | 127 | the program was not found |
//! | 3 | `ptyd server`: the namespace is already served |
//! | N | the pane's or command's own code (`run`, `wait --exit`, `send --wait`), 128+S for signal S |
//!
//! With `--json`, a failure is also printed on stdout as
//! `{"error": {"code": "...", "message": "...", "exit_code": N}}`.

/// The exit code of a command whose wait or pane timed out (as timeout(1)).
pub const TIMEOUT_EXIT: i32 = 124;

mod args;
mod cmd_attach;
mod cmd_layout;
mod cmd_pane;
mod cmd_raw;
mod cmd_server;
mod cmd_show;
mod cmd_tree;
mod commands;
mod completions;
mod config;
mod demo;
mod duration;
mod help;
mod manpage;
mod pane_spec;
mod scripting;
mod service;
mod suggest;
mod upgrade;

use crate::paths::{DEFAULT_NAMESPACE, NamespacePaths};
use lexopt::prelude::*;

/// A failure the CLI reports: the message, the exit code, and a short
/// machine-readable kind (`usage`, or the server's error code).
#[derive(Debug)]
pub struct CliError {
    pub message: String,
    pub code: i32,
    pub kind: String,
}

impl CliError {
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError {
            message: message.into(),
            code: 2,
            kind: "usage".into(),
        }
    }

    /// ptyd itself failed (exit code 1).
    pub fn failure(message: impl Into<String>) -> CliError {
        CliError {
            message: message.into(),
            code: 1,
            kind: "failed".into(),
        }
    }
}

/// The exit code for a server's (or the client library's) error code.
fn exit_code_for(code: &str, message: &str) -> i32 {
    match code {
        "invalid_params" | "unknown_method" | "invalid_request" | "parse_error" => 2,
        "timeout" => TIMEOUT_EXIT,
        // As shells report a command they cannot start.
        "spawn_failed" if message.contains("(os error 2)") => 127,
        "spawn_failed"
            if ["(os error 13)", "(os error 8)", "(os error 21)"]
                .iter()
                .any(|e| message.contains(e)) =>
        {
            126
        }
        _ => 1,
    }
}

impl From<crate::client::ClientError> for CliError {
    fn from(e: crate::client::ClientError) -> CliError {
        CliError {
            code: exit_code_for(e.code(), &e.message),
            kind: e.code().to_string(),
            message: e.message,
        }
    }
}

impl From<lexopt::Error> for CliError {
    fn from(e: lexopt::Error) -> CliError {
        CliError::usage(e.to_string())
    }
}

/// Options every command shares.
pub struct Global {
    pub paths: NamespacePaths,
}

/// Runs the command line and returns the process exit code.
pub fn main() -> i32 {
    match run() {
        Ok(code) => code,
        Err(e) => {
            if json_requested() {
                let error = serde_json::json!({
                    "error": { "code": e.kind, "message": e.message, "exit_code": e.code }
                });
                println!("{error}");
            }
            if e.message.is_empty() {
            } else if crate::service::journal::stderr_is_journal() {
                // journald records the identifier itself; `<3>` is "error".
                eprintln!("<3>{}", e.message);
            } else {
                eprintln!("ptyd: {}", e.message);
            }
            // Only where the message does not say already what to do
            // (a command or option to use, in backquotes).
            if e.code == 2 && !e.message.contains('`') {
                eprintln!("Try `ptyd --help`.");
            }
            e.code
        }
    }
}

/// Whether `--json` is among the options (before a `--` that ends them).
fn json_requested() -> bool {
    std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
}

fn run() -> Result<i32, CliError> {
    end_quietly_on_closed_stdout();
    let mut parser = lexopt::Parser::from_env();
    let args::Leading { given, command } = args::parse_global(help::GLOBAL_OPTIONS, &mut parser)?;
    let mut namespace = std::env::var("PTYD_NAMESPACE")
        .ok()
        .filter(|s| !s.is_empty());
    for (long, value) in given {
        match long {
            "help" => {
                print!("{}", help::MAIN);
                return Ok(0);
            }
            "version" => {
                println!(
                    "ptyd {} (protocol {})",
                    crate::protocol::SERVER_VERSION,
                    crate::protocol::PROTOCOL_VERSION
                );
                return Ok(0);
            }
            _ => namespace = Some(value.string()?),
        }
    }
    let Some(command) = command else {
        print!("{}", help::MAIN);
        return Err(CliError::usage("no command given"));
    };
    if command == "server" {
        // Back to the default hook (see `end_quietly_on_closed_stdout`).
        drop(std::panic::take_hook());
    }
    let namespace = namespace.unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
    let paths = NamespacePaths::resolve(&namespace).map_err(CliError::usage)?;
    let global = Global { paths };
    commands::dispatch(&global, &command, parser)
}

/// A reader that went away (`ptyd status --json | head -c 5`) ends a
/// command quietly with 141, as SIGPIPE would, instead of the panic
/// `print!` raises on EPIPE. SIGPIPE itself stays ignored: the client's
/// socket writes must fail with an error it can report, not kill it. Not
/// for `ptyd server`, whose panics are caught so it can still save.
fn end_quietly_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout")
            && message.contains(&format!("(os error {})", crate::sys::broken_pipe_errno()))
        {
            std::process::exit(141);
        }
        default(info);
    }));
}
