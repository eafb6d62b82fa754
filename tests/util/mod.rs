//! The harness every integration test shares. Nothing is mocked: a test
//! runs the real binary as a private `ptyd server` (its own directories and
//! namespace), over real sockets, with real PTYs and processes.
//!
//! - `server.rs`: [`Dirs`] (one temp dir per test: runtime, state, home)
//!   and [`Ptyd`], a server child ended on drop; CLI runs.
//! - `client.rs`: [`Conn`], a JSON-lines client.
//! - `attach.rs`: the frame codec and [`Attached`], an attached client.
//! - `tmux.rs`: [`Tmux`], a private tmux server as the outer terminal.
//! - `process.rs`: [`KillOnDrop`], the guard for every other process a test
//!   starts or watches, and `/proc` queries.
//! - `wait.rs`: [`eventually`], the one way to wait for what reports nothing.
//! - `files.rs`: file modes and directory listings.
//!
//! Every blocking step has a deadline ([`TIMEOUT`]) and fails the test with a
//! message saying what was awaited, so a hang is a clear failure. Tests wait
//! on what the server reports (`pane.wait`, events, EXIT frames), not on
//! sleeps; [`eventually`] polls only what reports nothing (a foreign process
//! dying, a file appearing, fds in `/proc`, tmux's screen).
//!
//! The test files, one per area (`cargo test --test NAME` runs one):
//! - `panes.rs`: pane lifecycle over the API, exit statuses, tree kill,
//!   input acks and `request_id` dedup, environment, concurrency.
//! - `protocol_errors.rs`: malformed and hostile input; the connection and
//!   the server survive it.
//! - `socket.rs`: one server per namespace, stale sockets, file modes,
//!   namespace isolation, stop and signals, other uids.
//! - `attach.rs`: frames, detach, EXIT reasons, slow clients, `ptyd attach`
//!   and `ptyd new` driven inside tmux.
//! - `cli.rs`: the commands, their output and exit codes, auto-start (and
//!   which commands never start a server).
//! - `clients.rs`: several clients on a pane: `ptyd clients`, `ls` marks,
//!   `detach` (`--others`, `--all`, `--client`), `attach -d`, the
//!   `window_size` policy as clients attach, type, resize and leave, a bare
//!   `ptyd attach`.
//! - `habits.rs`: `ptyd help`, "did you mean", `-t`, `new -A`, `new -s`'s
//!   error, `--json` on action commands, snake_case modes, the default wait
//!   timeout (30 s for real with `PTYD_LONG_TESTS=1`).
//! - `held.rs`: held panes explained in ls, send, wait --exit and attach;
//!   `respawn --held`; the restore summary in status and `server.restored`.
//! - `protocol_docs.rs`: every JSON example of docs/protocol.md parses and
//!   has the shape of what a real server accepts and sends.
//! - `events.rs`: replay, live delivery, sequence numbers.
//! - `waits.rs`: `pane.wait` conditions and timeouts, pane watchdogs.
//! - `scripting.rs`: driving panes from scripts with real bash, zsh and
//!   fish: injected shell integration, `send --wait`/`--wait-for`, waits
//!   that fail fast or skip the past and the echo, keys, stdin, pastes,
//!   durations.
//! - `persist.rs`: snapshot and restore (round trip, fixtures, policies,
//!   history, durability of the writer under SIGKILL and EFBIG).
//! - `file_trust.rs`: state and config directories and files others could
//!   write are refused; symlinks, FIFOs and huge files as `session.json`,
//!   history or config; a `history/` symlink; the lock file.
//! - `upgrade.rs`: the live upgrade end to end (counters and clients through
//!   repeated upgrades, 300 panes, every fault point, no fd or zombie left).
//! - `upgrade_outcomes.rs`: what `ptyd upgrade` reports and when: success
//!   only after the probation, old -> new named, twice in a row, binaries
//!   that die, linger (no freeze) or cannot serve (`--mode restore`), the
//!   new side's own reason quoted.
//! - `upgrade_skew.rs`: a live upgrade from a pinned older commit, built
//!   once and cached under the target directory.
//! - `torture.rs`: counters, clients, pane kills, upgrades and SIGKILLs of
//!   either side at random moments, every invariant after each round
//!   (`PTYD_TORTURE_ROUNDS`, `PTYD_TORTURE_SEED`).
//! - `upgrade_restore.rs`: `upgrade --mode restore`, the restart-in-place
//!   fallback, and resume rules from the config.
//! - `service.rs`: the shipped units and what `ptyd service install` writes
//!   pass `systemd-analyze verify`; install/uninstall; the notify protocol
//!   through an upgrade; a second server names the serving pid.
//! - `crash.rs`: SIGKILL/SIGSEGV/SIGABRT of the serving process at random
//!   moments, the keeper's replacement (`PTYD_CRASH_ROUNDS`); a crash loop.
//! - `crash_upgrade.rs`: either side of a live upgrade killed at a fault
//!   point. Both share `crash_support/` (the counter, shell and client
//!   setup and every check after a crash).
//! - `history_store.rs`: the history log keeps histories' compressed
//!   blocks: a history byte for byte through a crash, an upgrade and a
//!   restore, the log holding it compressed, a damaged block record read
//!   as a marker, the budget's drops giving the log's pages back.
//! - `fd_store.rs`: the keeper killed under a played systemd whose fd
//!   store holds the panes; the restart takes them over.
//! - `activation.rs`: socket activation with a socket passed as systemd
//!   does (fd 3, `LISTEN_*`), through live and restore-mode upgrades; wrong
//!   sockets refused.
//! - `autostart.rs`: `autostart = false`; a client-started server holds
//!   `rerun` panes.
//! - `config.rs`: config.toml problems by line, key and allowed range,
//!   `ptyd config check`, `ptyd config reload` (new panes get the new
//!   values, bad keys reported, the rest in force), the shell, `TERM` and
//!   restore policy of new panes, upgrade timeout and probation.
//! - `logs.rs`: journald priorities on `JOURNAL_STREAM`, plain lines
//!   otherwise, `server.stderr` appended and rotated.
//! - `packaging.rs`: the man page renders with man(1); bash and fish
//!   completion in the real shells (commands, values, panes); the zsh
//!   script parses.
//! - `term_golden.rs`: the terminal model against `fixtures/vt/` goldens.
//! - `term_roundtrip.rs`: the model serialized and restored at any byte of a
//!   stream ends in the same state.
//! - `term_robustness.rs`: random input never panics the model or grows it
//!   without bound.
//! - `term_differential.rs`: the model against the `vt100` crate on random
//!   streams of shared features.
//! - `term_vs_tmux.rs`: recorded sessions of real programs, the model against
//!   a real tmux pane.
//! - `tmux_front.rs`: ptyd run as `tmux`: the commands agent managers send,
//!   tmux's errors, `TMUX`/`TMUX_PANE` in its panes and in no other, a
//!   script driving it through a live upgrade and a SIGKILL.
//!
//! `rng/` is the deterministic generator the random `term_*` tests share.

#![allow(dead_code, unused_imports)] // Each test file uses a different part.

mod attach;
mod client;
mod files;
mod process;
mod server;
mod tmux;
mod wait;

pub use attach::{
    Attached, Background, DETACH, EXIT, FrameReader, INPUT, OUTPUT, RESIZE, attach_in_pty, frame,
};
pub use client::{Conn, RpcErr, abbreviate, serves, split};
pub use files::{files_under, set_mode, temp_files};
pub use process::{
    KillOnDrop, all_pids, cmdline, ppid, proc_stat_field, process_gone, start_time, wait_child,
    zombie_children,
};
pub use server::{
    Dirs, PTYD, Ptyd, ServerStderr, assert_exit, run_bounded, stderr, stdout, unique_name,
};
pub use tmux::{Tmux, outer_shell, shell_quote};
pub use wait::{Check, TIMEOUT, eventually, eventually_within, poll_until};

/// A number a test takes from the environment (`PTYD_CRASH_ROUNDS=200` for
/// a longer run), else `default`. A value that is no number fails the test
/// instead of quietly running the default.
pub fn env_number<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}
