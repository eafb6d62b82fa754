//! Output throughput: `cat` of a file in a pane, timed until the last byte
//! has reached the reader, through ptyd's protocol client (frames read by
//! the bench) or end to end through a real client (`ptyd attach`, `tmux
//! attach`) running in a terminal the bench drains, against a bare PTY.

use super::pty::{END_MARKER, PtyProc, SPLIT_END_MARKER};
use super::server::{PtydServer, STUCK};
use super::tmux::Tmux;
use super::{Res, path_str, process_cpu, shell_quote};
use ptyd::client::ServerFrame;
use serde_json::json;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub struct Throughput {
    pub elapsed: Duration,
    /// Bytes the reader received (PTY output, frame payloads, or what the
    /// client wrote to its terminal).
    pub received: u64,
    /// CPU time (user + system) the ptyd or tmux server used meanwhile.
    pub server_cpu: Option<Duration>,
    /// CPU time the attach client used meanwhile.
    pub client_cpu: Option<Duration>,
}

fn cpu_since(pid: Option<u32>, before: Option<Duration>) -> Option<Duration> {
    before
        .zip(pid.and_then(process_cpu))
        .map(|(a, b)| b.saturating_sub(a))
}

/// ptyd through its protocol client: a pane created with `attach: true,
/// read_only: true` on the connection that then reads frames, timed from
/// the request to the EXIT frame (so every byte has reached the client).
/// Leaves out the cost of `ptyd attach` itself.
pub fn protocol(
    server: &mut PtydServer,
    file: &Path,
    tmp: &Path,
    (cols, rows): (u16, u16),
) -> Res<Throughput> {
    let params = json!({
        "argv": ["cat", path_str(file)?],
        "attach": true,
        "read_only": true,
        "cols": cols,
        "rows": rows,
        "cwd": path_str(tmp)?,
    });
    let pid = Some(server.serving_pid);
    let cpu0 = pid.and_then(process_cpu);
    let t0 = Instant::now();
    let mut reader = server.create_attached(params)?;
    let mut received = 0u64;
    loop {
        match reader.next_blocking().map_err(|e| e.to_string())? {
            Some(ServerFrame::Output(bytes)) => received += bytes.len() as u64,
            Some(ServerFrame::Exit(v)) => {
                let elapsed = t0.elapsed();
                if v["reason"] != "pane_exited" || v["exit"]["code"] != 0 {
                    return Err(format!("attachment ended after {received} bytes with {v}"));
                }
                return Ok(Throughput {
                    elapsed,
                    received,
                    server_cpu: cpu_since(pid, cpu0),
                    client_cpu: None,
                });
            }
            None => {
                return Err(format!(
                    "ptyd closed the connection without an EXIT frame after {received} bytes"
                ));
            }
        }
    }
}

/// Where the end-to-end runs show a pane's output.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Terminal {
    /// `cat` straight in a PTY the bench drains.
    Bare,
    /// `ptyd attach` in a PTY the bench drains, as it comes (a terminal
    /// that falls behind skips output and is redrawn once caught up).
    PtydAttach,
    /// `ptyd attach` with direct output off (`PTYD_ATTACH_DIRECT=0`): the
    /// client writes the output it reads off the socket, as before the
    /// server wrote to the terminal itself.
    PtydSocket,
    /// `ptyd attach --lossless`: every byte reaches the terminal, and the
    /// pane waits for it.
    PtydLossless,
    /// The same with another ptyd binary (server and client), for a
    /// before/after comparison in one run.
    PtydBaseline,
    /// `tmux attach` in a PTY the bench drains.
    TmuxAttach,
    /// `ptyd attach` showing a tab split side by side: the program in the
    /// left pane, an idle one on the right; the server composes the view.
    PtydSplit,
    /// `tmux attach` to a window split the same way.
    TmuxSplit,
    /// The program behind a two-PTY relay (`relay.rs`) in a PTY the bench
    /// drains: the floor under any multiplexer.
    Relay,
}

impl Terminal {
    pub const ALL: [Terminal; 6] = [
        Terminal::Bare,
        Terminal::PtydAttach,
        Terminal::PtydSocket,
        Terminal::PtydLossless,
        Terminal::TmuxAttach,
        Terminal::Relay,
    ];

    /// Whether every byte `cat` wrote must reach the terminal: not through
    /// a client that skips output to redraw (ptyd attach by default, tmux),
    /// nor through another binary's `ptyd attach`, which may be either.
    pub fn lossless(self) -> bool {
        matches!(
            self,
            Terminal::Bare | Terminal::PtydLossless | Terminal::Relay
        )
    }

    /// Whether the program runs in one pane of a two-pane split.
    pub fn split(self) -> bool {
        matches!(self, Terminal::PtydSplit | Terminal::TmuxSplit)
    }

    pub fn label(self) -> &'static str {
        match self {
            Terminal::Bare => "bare pty",
            Terminal::PtydAttach => "ptyd attach",
            Terminal::PtydSocket => "ptyd attach, socket path",
            Terminal::PtydLossless => "ptyd attach, lossless",
            Terminal::PtydBaseline => "ptyd attach (baseline)",
            Terminal::TmuxAttach => "tmux attach",
            Terminal::PtydSplit => "ptyd attach, split view",
            Terminal::TmuxSplit => "tmux attach, split window",
            Terminal::Relay => "two-PTY relay (floor)",
        }
    }
}

/// A ptyd binary and a server running it.
pub struct Ptyd<'a> {
    pub bin: &'a Path,
    pub server: &'a mut PtydServer,
}

/// What one end-to-end run needs.
pub struct EndToEnd<'a> {
    pub ptyd: Ptyd<'a>,
    pub baseline: Option<Ptyd<'a>>,
    pub tmp: &'a Path,
    pub size: (u16, u16),
    /// Every run gets its own names (FIFO, tmux socket).
    pub run: usize,
}

/// `cat` of `file` as a user sees it: the program prints READY and waits
/// on a FIFO; once READY has reached the bench (so the client is attached
/// and drawing) the bench writes to the FIFO and reads the outer terminal
/// as fast as it can until the end marker `cat`'s output is followed by
/// has gone by (for a client that redraws, in the screen it was last
/// drawn). `min_bytes` is what a lossless terminal must have delivered by
/// then (0 for one that redraws: `Terminal::lossless`).
pub fn end_to_end(
    e: &mut EndToEnd,
    term: Terminal,
    file: &Path,
    min_bytes: u64,
) -> Res<Throughput> {
    let fifo = e.tmp.join(format!("go-{}-{term:?}", e.run));
    make_fifo(&fifo)?;
    // Opened read-write: never blocks, and keeps the FIFO alive until the
    // program has read its line.
    let mut go = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(&fifo)
        .map_err(|e| format!("opening {}: {e}", fifo.display()))?;
    let marker = if term.split() {
        SPLIT_END_MARKER
    } else {
        END_MARKER
    };
    let script = format!(
        "printf READY; read _ < {}; cat {}; printf '\\n%s' {}; exec sleep 100000",
        shell_quote(path_str(&fifo)?),
        shell_quote(path_str(file)?),
        shell_quote(marker),
    );
    let (cols, rows) = e.size;
    let mut _tmux = None;
    let mut pane = None;
    let (mut outer, server_pid) = match term {
        Terminal::Bare => (
            PtyProc::spawn(&["sh", "-c", &script], &[], cols, rows)?,
            None,
        ),
        Terminal::Relay => (
            super::relay::spawn_relayed(&["sh", "-c", &script], cols, rows)?,
            None,
        ),
        Terminal::PtydAttach
        | Terminal::PtydSocket
        | Terminal::PtydLossless
        | Terminal::PtydBaseline
        | Terminal::PtydSplit => {
            let ptyd = match term {
                Terminal::PtydBaseline => {
                    e.baseline.as_mut().ok_or("no baseline ptyd binary given")?
                }
                _ => &mut e.ptyd,
            };
            let mut ctl = ptyd.server.connect()?;
            let info = ctl
                .call(
                    "pane.create",
                    json!({ "argv": ["sh", "-c", script], "cols": cols, "rows": rows, "cwd": path_str(e.tmp)? }),
                )
                .map_err(|err| format!("pane.create: {err}"))?;
            let id = ptyd.server.track(&info)?;
            let mut ids = vec![id.clone()];
            if term == Terminal::PtydSplit {
                let right = ctl
                    .call(
                        "pane.create",
                        json!({ "argv": ["sleep", "100000"], "split": id, "direction": "horizontal" }),
                    )
                    .map_err(|err| format!("pane.create (split): {err}"))?;
                ids.push(ptyd.server.track(&right)?);
            }
            pane = Some((ctl, ids));
            let bin = path_str(ptyd.bin)?;
            let ns = ptyd.server.paths.namespace.clone();
            let mut env = ptyd.server.client_env()?;
            env.push(("TERM", Path::new("xterm-256color")));
            if term == Terminal::PtydSocket {
                env.push(("PTYD_ATTACH_DIRECT", Path::new("0")));
            }
            let mut argv = vec![bin, "-L", &ns, "attach", &id];
            if term == Terminal::PtydLossless {
                argv.push("--lossless");
            }
            let client = PtyProc::spawn(&argv, &env, cols, rows)?;
            (client, Some(ptyd.server.serving_pid))
        }
        Terminal::TmuxAttach | Terminal::TmuxSplit => {
            let tmux = Tmux::new(e.tmp, &format!("tput{}-{term:?}", e.run), &[])?;
            tmux.new_session(
                "bench",
                &format!("sh -c {}", shell_quote(&script)),
                cols,
                rows,
            )?;
            if term == Terminal::TmuxSplit {
                // -d: the program's pane keeps the focus, as in ptyd's view.
                tmux.run(&["split-window", "-d", "-h", "-t", "bench", "sleep 100000"])?;
            }
            let client = tmux.attach_client("bench", cols, rows)?;
            let pid = tmux.server_pid()?;
            _tmux = Some(tmux);
            (client, Some(pid))
        }
    };
    let result = (|| {
        outer
            .read_until(b"READY", STUCK)
            .map_err(|err| format!("waiting for READY: {err}"))?;
        let client_pid = (term != Terminal::Bare).then_some(outer.child.id());
        let (server0, client0) = (
            server_pid.and_then(process_cpu),
            client_pid.and_then(process_cpu),
        );
        let t0 = Instant::now();
        go.write_all(b"go\n")
            .map_err(|err| format!("writing to {}: {err}", fifo.display()))?;
        let (received, at) = outer.read_until(marker.as_bytes(), STUCK)?;
        let elapsed = at.duration_since(t0);
        if received < min_bytes {
            return Err(format!(
                "the terminal received {received} bytes, less than the {min_bytes} cat wrote"
            ));
        }
        Ok(Throughput {
            elapsed,
            received,
            server_cpu: cpu_since(server_pid, server0),
            client_cpu: cpu_since(client_pid, client0),
        })
    })();
    drop(outer);
    if let Some((mut ctl, ids)) = pane {
        // The panes' `sleep` would otherwise live as long as the server.
        for id in ids {
            let _ = ctl.call("pane.kill", json!({ "target": id }));
        }
    }
    let _ = std::fs::remove_file(&fifo);
    result
}

fn make_fifo(path: &PathBuf) -> Res<()> {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600))
        .map_err(|e| format!("mkfifo {}: {e}", path.display()))
}

/// Writes about `bytes` of SGR-coloured words in whole `\n`-terminated
/// lines (the tty adds the CR); returns the size written and the line
/// count.
pub fn generate_colour(path: &Path, bytes: usize) -> Res<(u64, u64)> {
    let text = super::term::sgr_text(bytes, b"\n");
    let end = text[..bytes.min(text.len())]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let text = &text[..end];
    let mut f = File::create(path).map_err(|e| format!("creating {}: {e}", path.display()))?;
    f.write_all(text)
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    let lines = text.iter().filter(|&&b| b == b'\n').count();
    Ok((text.len() as u64, lines as u64))
}
