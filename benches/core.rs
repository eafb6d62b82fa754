//! The core benchmark: ptyd against a bare PTY and against tmux, in one run.
//!
//! 1. Throughput: `cat` of a generated file (printable 100-byte lines) in a
//!    200x50 terminal,
//!    a. in a bare PTY we read until EIO (timed from spawn to the last byte),
//!    b. in a ptyd pane created with `attach: true, read_only: true` on the
//!    connection that then reads frames (timed from the request to the
//!    EXIT frame, so every byte has reached the client),
//!    c. in a tmux pane with one `tmux attach` client in a bare PTY whose
//!    output we drain; `cat` starts on `wait-for go` once the client is
//!    attached, and the time runs until `wait-for done` returns. tmux
//!    redraws rather than forwards, so its client reads fewer bytes, and
//!    the clock stops when the tmux server has consumed the output, not
//!    when the client has drawn it (slightly in tmux's favour).
//!    Runs are interleaved (`--runs`, default 2) and the fastest of each is
//!    reported, with the CPU time the ptyd or tmux server used.
//! 2. Keystroke echo latency (p50/p99 over `--keys`, default 500): one byte
//!    in, time until it comes back, against `cat` on a raw-mode terminal (so
//!    `cat` itself echoes, as a shell's line editor would), for a bare PTY,
//!    a ptyd client sending INPUT frames and reading OUTPUT frames, and a
//!    `tmux attach` client we type into through its PTY.
//!
//! Usage: `cargo build --release && cargo bench --bench core [-- --size-mb N
//! --keys N --runs N]`. The ptyd binary is `$PTYD_BIN`, else `ptyd` in the
//! parent of this executable's directory (`target/release/ptyd`).
//! Everything it starts (a private ptyd server, private tmux servers, PTY
//! children) and every file it writes lives in one temporary directory and
//! is stopped or removed on the way out, errors included; with
//! `PTYD_BENCH_KEEP=1` the directory (server logs) is kept. A failed
//! measurement is printed in its row and makes the run exit non-zero.

use ptyd::client::{self, Client, FrameReader, ServerFrame};
use ptyd::paths::NamespacePaths;
use ptyd::protocol::frame;
use serde_json::{Value, json};
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod common;

use common::{
    find_ptyd, keep_dir, loadavg, nproc, parse_num, path_str, set_cloexec, shell_quote,
    wait_readable,
};

type Res<T> = Result<T, String>;

const COLS: u16 = 200;
const ROWS: u16 = 50;
const LINE_LEN: usize = 100;
/// How long any single wait may take before the run is declared stuck.
const STUCK: Duration = Duration::from_secs(60);
/// How long one keystroke may take to echo before the run is declared stuck.
const KEY_TIMEOUT: Duration = Duration::from_secs(5);
/// Keystrokes typed before measuring (first-use costs: page faults, caches).
const WARMUP_KEYS: usize = 20;
const NO_TMUX: &str = "skipped (no tmux)";
const NO_RUN: &str = "no run";
/// The program the latency runs talk to: `cat` on a raw, non-echoing tty, so
/// the echo is `cat` writing back what it read.
const ECHO_SCRIPT: &str = "stty raw -echo; printf READY; exec cat";

struct Args {
    size_mb: usize,
    keys: usize,
    runs: usize,
}

fn parse_args() -> Res<Args> {
    use lexopt::prelude::*;
    let mut args = Args {
        size_mb: 100,
        keys: 500,
        runs: 2,
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Long("size-mb") => args.size_mb = parse_num(p.value(), "--size-mb")?,
            Long("keys") => args.keys = parse_num(p.value(), "--keys")?,
            Long("runs") => args.runs = parse_num(p.value(), "--runs")?,
            // `cargo bench` passes --bench; a filter argument is meaningless here.
            Long("bench") | Value(_) => {}
            Short('h') | Long("help") => {
                println!(
                    "usage: cargo bench --bench core [-- [--size-mb N] [--keys N] [--runs N]]"
                );
                std::process::exit(0);
            }
            other => return Err(other.unexpected().to_string()),
        }
    }
    if args.size_mb == 0 || args.keys == 0 || args.runs == 0 {
        return Err("--size-mb, --keys and --runs must be at least 1".into());
    }
    Ok(args)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("bench core: error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Res<()> {
    let args = parse_args()?;
    let ptyd_bin = find_ptyd()?;
    let have_tmux = Command::new("tmux")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let dir = tempfile::Builder::new()
        .prefix("ptyd-bench-")
        .tempdir()
        .map_err(|e| format!("creating a temporary directory: {e}"))?;
    let file = dir.path().join("data.txt");
    let bytes = args.size_mb * 1_000_000;
    let lines = generate(&file, bytes)?;

    println!(
        "ptyd core bench: nproc {}, load {}, ptyd {}",
        nproc(),
        loadavg(),
        ptyd_bin.display()
    );
    println!(
        "throughput: cat of {} MB ({lines} lines of {LINE_LEN} B) in a {COLS}x{ROWS} terminal, best of {} interleaved runs; latency: {} keys (+{WARMUP_KEYS} warm-up), 1 byte each",
        args.size_mb, args.runs, args.keys
    );
    if !have_tmux {
        println!("tmux not found: its rows are skipped");
    }

    let result = measure(&args, &ptyd_bin, have_tmux, &file, dir.path(), bytes);
    keep_dir(dir);
    result
}

fn measure(
    args: &Args,
    ptyd_bin: &Path,
    have_tmux: bool,
    file: &Path,
    tmp: &Path,
    bytes: usize,
) -> Res<()> {
    let server = PtydServer::start(ptyd_bin, tmp)?;

    // A failed measurement is reported in its row and the others still run.
    // Runs interleaved so a burst of load elsewhere on the machine hits all
    // three alike; the best (fastest) run of each is reported.
    let mut tput: [(&str, Res<Throughput>); 3] = [
        ("bare pty", Err(NO_RUN.into())),
        ("ptyd", Err(NO_RUN.into())),
        ("tmux", Err(NO_TMUX.into())),
    ];
    if have_tmux {
        tput[2].1 = Err(NO_RUN.into());
    }
    for _ in 0..args.runs {
        keep_best(
            &mut tput[0].1,
            throughput_bare(file).and_then(all_of(bytes)),
        );
        keep_best(
            &mut tput[1].1,
            throughput_ptyd(&server, file, tmp).and_then(all_of(bytes)),
        );
        if have_tmux {
            keep_best(&mut tput[2].1, throughput_tmux(file, tmp));
        }
    }
    let lat: [(&str, Res<Latency>); 3] = [
        ("bare pty", latency_bare(args.keys)),
        ("ptyd", latency_ptyd(&server, tmp, args.keys)),
        (
            "tmux",
            if have_tmux {
                latency_tmux(tmp, args.keys)
            } else {
                Err(NO_TMUX.into())
            },
        ),
    ];
    drop(server);

    report(bytes, &tput, &lat);
    let is_failure = |r: Result<(), &String>| r.is_err_and(|e| e != NO_TMUX);
    let failed = tput
        .iter()
        .filter(|(_, r)| is_failure(r.as_ref().map(drop)))
        .count()
        + lat
            .iter()
            .filter(|(_, r)| is_failure(r.as_ref().map(drop)))
            .count();
    if failed > 0 {
        return Err(format!("{failed} measurement(s) failed, see above"));
    }
    Ok(())
}

// ---------------------------------------------------------------- reporting

struct Throughput {
    elapsed: Duration,
    /// Bytes the reader received (PTY output, frame payloads, or what the
    /// tmux client drew).
    received: u64,
    /// CPU time (user + system) the ptyd or tmux server used meanwhile.
    server_cpu: Option<Duration>,
}

/// Checks that the reader got every byte of `cat`'s output: the file plus a
/// CR per line (the tty's ONLCR).
fn all_of(bytes: usize) -> impl Fn(Throughput) -> Res<Throughput> {
    move |t| {
        let want = (bytes + bytes / LINE_LEN) as u64;
        if t.received == want {
            Ok(t)
        } else {
            Err(format!("received {} bytes, expected {want}", t.received))
        }
    }
}

/// Keeps the faster of two runs. A failure always wins: a failure in any
/// run is a finding, and is what gets reported.
fn keep_best(best: &mut Res<Throughput>, run: Res<Throughput>) {
    let better = match (&*best, &run) {
        (_, Err(_)) => true,
        (Ok(b), Ok(r)) => r.elapsed < b.elapsed,
        (Err(e), Ok(_)) => e == NO_RUN,
    };
    if better {
        *best = run;
    }
}

/// CPU time (user + system) of process `pid` so far.
fn process_cpu(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the whole line.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| Duration::from_secs_f64(ticks as f64 / hz as f64))
}

struct Latency {
    p50: Duration,
    p99: Duration,
    max: Duration,
}

fn report(bytes: usize, tput: &[(&str, Res<Throughput>)], lat: &[(&str, Res<Latency>)]) {
    let mbs = |t: &Throughput| bytes as f64 / 1e6 / t.elapsed.as_secs_f64();
    let bare_t = tput[0].1.as_ref().map_or(f64::NAN, &mbs);
    println!();
    println!(
        "{:<28} {:>9} {:>9} {:>10} {:>12} {:>13}",
        "throughput", "time s", "MB/s", "vs bare", "bytes read", "server cpu s"
    );
    for (name, t) in tput {
        match t {
            Ok(t) => println!(
                "{:<28} {:>9.3} {:>9.1} {:>9.2}x {:>12} {:>13}",
                format!("  {name}"),
                t.elapsed.as_secs_f64(),
                mbs(t),
                mbs(t) / bare_t,
                t.received,
                t.server_cpu
                    .map_or("-".into(), |c| format!("{:.2}", c.as_secs_f64()))
            ),
            Err(e) => println!("{:<28} {e}", format!("  {name}")),
        }
    }
    let bare_l = lat[0].1.as_ref().ok();
    println!(
        "{:<28} {:>9} {:>9} {:>10} {:>12}",
        "echo latency (us)", "p50", "p99", "p50/bare", "max"
    );
    for (name, l) in lat {
        match l {
            Ok(l) => println!(
                "{:<28} {:>9.1} {:>9.1} {:>9.2}x {:>12.1}",
                format!("  {name}"),
                us(l.p50),
                us(l.p99),
                bare_l.map_or(f64::NAN, |b| us(l.p50) / us(b.p50)),
                us(l.max)
            ),
            Err(e) => println!("{:<28} {e}", format!("  {name}")),
        }
    }
    println!();
    let mb = |i: usize| tput[i].1.as_ref().map_or(f64::NAN, &mbs);
    let p50 = |i: usize| lat[i].1.as_ref().map_or(f64::NAN, |l| us(l.p50));
    let p99 = |i: usize| lat[i].1.as_ref().map_or(f64::NAN, |l| us(l.p99));
    println!(
        "ratios (MB/s): ptyd/bare {:.2}  tmux/bare {:.2}  ptyd/tmux {:.2}",
        mb(1) / mb(0),
        mb(2) / mb(0),
        mb(1) / mb(2)
    );
    println!(
        "ratios (latency p50): ptyd/bare {:.2}  tmux/bare {:.2}  ptyd/tmux {:.2}",
        p50(1) / p50(0),
        p50(2) / p50(0),
        p50(1) / p50(2)
    );
    println!(
        "ratios (latency p99): ptyd/bare {:.2}  tmux/bare {:.2}  ptyd/tmux {:.2}",
        p99(1) / p99(0),
        p99(2) / p99(0),
        p99(1) / p99(2)
    );
    println!("(MB/s ratios above 1 and latency ratios below 1 favour the first named)");
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn latency_stats(mut samples: Vec<Duration>) -> Latency {
    samples.sort();
    let at = |q: usize| samples[(samples.len() * q / 100).min(samples.len() - 1)];
    Latency {
        p50: at(50),
        p99: at(99),
        max: samples[samples.len() - 1],
    }
}

// ---------------------------------------------------------------- set-up

/// Writes `bytes` bytes of printable 100-byte lines; returns the line count.
fn generate(path: &Path, bytes: usize) -> Res<usize> {
    let alphabet: Vec<u8> = (b' '..=b'~').collect();
    let mut w = BufWriter::with_capacity(1 << 20, File::create(path).map_err(|e| e.to_string())?);
    let lines = bytes / LINE_LEN;
    let mut line = Vec::with_capacity(LINE_LEN);
    for i in 0..lines {
        line.clear();
        write!(line, "{i:010} ").map_err(|e| e.to_string())?;
        let mut k = i % alphabet.len();
        while line.len() < LINE_LEN - 1 {
            line.push(alphabet[k]);
            k = (k + 1) % alphabet.len();
        }
        line.push(b'\n');
        w.write_all(&line).map_err(|e| e.to_string())?;
    }
    w.flush().map_err(|e| e.to_string())?;
    Ok(lines)
}

/// A process on the slave side of a PTY we hold the master of. Killed and
/// reaped on drop.
struct PtyProc {
    master: File,
    child: Child,
}

impl PtyProc {
    fn spawn(argv: &[&str], env: &[(&str, &Path)]) -> Res<PtyProc> {
        let ws = nix::pty::Winsize {
            ws_row: ROWS,
            ws_col: COLS,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = nix::pty::openpty(&ws, None).map_err(|e| format!("openpty: {e}"))?;
        // Neither end may leak into other children: a stray slave copy would
        // keep the master from ever seeing EIO.
        set_cloexec(pty.master.as_raw_fd())?;
        set_cloexec(pty.slave.as_raw_fd())?;
        let slave = |fd: &OwnedFd| fd.try_clone().map(Stdio::from).map_err(|e| e.to_string());
        let mut cmd = Command::new(argv[0]);
        cmd.args(&argv[1..])
            .env_remove("TMUX")
            .stdin(slave(&pty.slave)?)
            .stdout(slave(&pty.slave)?)
            .stderr(slave(&pty.slave)?);
        for (k, v) in env {
            cmd.env(k, v);
        }
        // SAFETY: setsid and ioctl are async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|e| format!("starting {argv:?}: {e}"))?;
        drop(cmd);
        drop(pty.slave);
        Ok(PtyProc {
            master: File::from(pty.master),
            child,
        })
    }

    /// Reads and discards output until the slave side is closed; returns the
    /// byte count. Blocking reads: nothing else in the loop to skew the bare
    /// reference.
    fn drain(&mut self) -> Res<u64> {
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0u64;
        loop {
            match self.master.read(&mut buf) {
                Ok(0) => return Ok(total),
                Ok(n) => total += n as u64,
                Err(e) if e.raw_os_error() == Some(libc::EIO) => return Ok(total),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("reading the PTY: {e}")),
            }
        }
    }
}

impl Drop for PtyProc {
    fn drop(&mut self) {
        // The child leads its own session: signal the whole group.
        let pid = self.child.id() as i32;
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

/// A private ptyd server: its own namespace and XDG directories inside the
/// bench's temporary directory. Stopped on drop.
struct PtydServer {
    child: Child,
    paths: NamespacePaths,
}

impl PtydServer {
    fn start(bin: &Path, tmp: &Path) -> Res<PtydServer> {
        let namespace = format!("bench-{}", std::process::id());
        let run_dir = tmp.join("run");
        let state_dir = tmp.join("state");
        let paths = NamespacePaths {
            namespace: namespace.clone(),
            runtime_dir: run_dir.join("ptyd").join(&namespace),
            state_dir: state_dir.join("ptyd").join(&namespace),
        };
        let (ready_r, ready_w) = nix::unistd::pipe().map_err(|e| format!("pipe: {e}"))?;
        set_cloexec(ready_r.as_raw_fd())?;
        let stderr = File::create(tmp.join("ptyd-server.stderr")).map_err(|e| e.to_string())?;
        let child = Command::new(bin)
            .args(["-L", &namespace, "server"])
            .env("XDG_RUNTIME_DIR", &run_dir)
            .env("XDG_STATE_HOME", &state_dir)
            .env(
                ptyd::protocol::READY_FD_ENV,
                ready_w.as_raw_fd().to_string(),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", bin.display()))?;
        drop(ready_w);
        let server = PtydServer { child, paths };
        // One byte when it accepts connections; EOF if it died first.
        let mut byte = [0u8; 1];
        if !wait_readable(ready_r.as_raw_fd(), STUCK)?
            || !matches!(File::from(ready_r).read(&mut byte), Ok(1))
        {
            let log = std::fs::read_to_string(tmp.join("ptyd-server.stderr")).unwrap_or_default();
            return Err(format!("the ptyd server did not start: {}", log.trim()));
        }
        Ok(server)
    }

    fn connect(&self) -> Res<Client> {
        Client::connect(&self.paths, false).map_err(|e| e.to_string())
    }

    /// Creates a pane on a fresh connection that is attached to it from the
    /// start; returns the frame reader.
    fn create_attached(&self, params: Value) -> Res<FrameReader> {
        let mut client = self.connect()?;
        client
            .call("pane.create", params)
            .map_err(|e| format!("pane.create: {e}"))?;
        let (stream, leftover) = client.into_stream();
        stream
            .set_read_timeout(Some(STUCK))
            .map_err(|e| e.to_string())?;
        Ok(FrameReader::new(stream, leftover))
    }
}

impl Drop for PtydServer {
    fn drop(&mut self) {
        let stopped = self
            .connect()
            .and_then(|mut c| c.call("server.stop", json!({})).map_err(|e| e.to_string()));
        if stopped.is_err() {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A private tmux server (`-L NAME`, sockets under our temporary directory,
/// no config). Killed on drop.
struct Tmux {
    name: String,
    tmpdir: PathBuf,
}

impl Tmux {
    fn new(tmp: &Path, tag: &str) -> Res<Tmux> {
        let tmpdir = tmp.join("tmux");
        std::fs::create_dir_all(&tmpdir).map_err(|e| e.to_string())?;
        Ok(Tmux {
            name: format!("ptyd-bench-{}-{tag}", std::process::id()),
            tmpdir,
        })
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.env("TMUX_TMPDIR", &self.tmpdir).env_remove("TMUX").args([
            "-L",
            &self.name,
            "-f",
            "/dev/null",
        ]);
        c
    }

    fn run(&self, args: &[&str]) -> Res<String> {
        let out = self
            .cmd()
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("running tmux {args:?}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "tmux {args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// A session running `command`, with the status line off so the
    /// attached client draws only the pane.
    fn new_session(&self, command: &str) -> Res<()> {
        let (c, r) = (COLS.to_string(), ROWS.to_string());
        self.run(&[
            "new-session",
            "-d",
            "-x",
            &c,
            "-y",
            &r,
            command,
            ";",
            "set",
            "-g",
            "status",
            "off",
        ])
        .map(drop)
    }

    /// `tmux attach` running in a bare PTY of the same size.
    fn attach_client(&self) -> Res<PtyProc> {
        let (name, tmpdir) = (self.name.as_str(), self.tmpdir.as_path());
        PtyProc::spawn(
            &["tmux", "-L", name, "-f", "/dev/null", "attach"],
            &[
                ("TMUX_TMPDIR", tmpdir),
                ("TERM", Path::new("xterm-256color")),
            ],
        )
    }

    /// Polls until a client is attached. tmux has no way to wait for that.
    fn wait_client(&self) -> Res<()> {
        let deadline = Instant::now() + STUCK;
        while self.run(&["list-clients"])?.trim().is_empty() {
            if Instant::now() > deadline {
                return Err("tmux client did not attach".into());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self
            .cmd()
            .arg("kill-server")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

// ---------------------------------------------------------------- throughput

fn throughput_bare(file: &Path) -> Res<Throughput> {
    let t0 = Instant::now();
    let mut p = PtyProc::spawn(&["cat", path_str(file)?], &[])?;
    let received = p.drain()?;
    let elapsed = t0.elapsed();
    check_exit(&mut p.child, "cat in the bare PTY")?;
    Ok(Throughput {
        elapsed,
        received,
        server_cpu: None,
    })
}

fn throughput_ptyd(server: &PtydServer, file: &Path, tmp: &Path) -> Res<Throughput> {
    let params = json!({
        "argv": ["cat", path_str(file)?],
        "attach": true,
        "read_only": true,
        "cols": COLS,
        "rows": ROWS,
        "cwd": path_str(tmp)?,
    });
    let cpu0 = process_cpu(server.child.id());
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
                let server_cpu = cpu0
                    .zip(process_cpu(server.child.id()))
                    .map(|(a, b)| b.saturating_sub(a));
                return Ok(Throughput {
                    elapsed,
                    received,
                    server_cpu,
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

fn throughput_tmux(file: &Path, tmp: &Path) -> Res<Throughput> {
    let tmux = Tmux::new(tmp, "tput")?;
    // cat starts only once the client is attached, so everything it writes
    // goes through an attached tmux.
    let script = format!(
        "tmux wait-for go; cat {}; tmux wait-for -S done",
        shell_quote(path_str(file)?)
    );
    tmux.new_session(&script)?;
    let client = tmux.attach_client()?;
    let master = client.master.try_clone().map_err(|e| e.to_string())?;
    let (tx, rx) = mpsc::channel();
    let drainer = std::thread::spawn(move || {
        let mut master = master;
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0u64;
        loop {
            match master.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if total == 0 {
                        let _ = tx.send(());
                    }
                    total += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        total
    });
    // The client's first output means the server is drawing for it.
    rx.recv_timeout(STUCK)
        .map_err(|_| "the tmux client wrote nothing".to_string())?;
    tmux.wait_client()?;
    let server_pid: Option<u32> = tmux.run(&["display", "-p", "#{pid}"])?.trim().parse().ok();
    let cpu0 = server_pid.and_then(process_cpu);
    let t0 = Instant::now();
    tmux.run(&["wait-for", "-S", "go"])?;
    tmux.run(&["wait-for", "done"])?;
    let elapsed = t0.elapsed();
    let server_cpu = cpu0
        .zip(server_pid.and_then(process_cpu))
        .map(|(a, b)| b.saturating_sub(a));
    drop(tmux);
    drop(client);
    let received = drainer.join().map_err(|_| "drainer thread panicked")?;
    Ok(Throughput {
        elapsed,
        received,
        server_cpu,
    })
}

fn check_exit(child: &mut Child, what: &str) -> Res<()> {
    let status = child.wait().map_err(|e| e.to_string())?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} exited with {status}"))
    }
}

// ---------------------------------------------------------------- latency

/// Something we type bytes into and read the terminal output of.
trait Echo {
    fn send(&mut self, bytes: &[u8]) -> Res<()>;
    /// Blocks until there is output, appending it to `out`.
    fn recv(&mut self, out: &mut Vec<u8>) -> Res<()>;
}

struct PtyEcho<'a>(&'a mut File);

impl Echo for PtyEcho<'_> {
    fn send(&mut self, bytes: &[u8]) -> Res<()> {
        self.0.write_all(bytes).map_err(|e| e.to_string())
    }

    fn recv(&mut self, out: &mut Vec<u8>) -> Res<()> {
        if !wait_readable(self.0.as_raw_fd(), KEY_TIMEOUT)? {
            return Err(format!("no output for {KEY_TIMEOUT:?}"));
        }
        let mut buf = [0u8; 16 * 1024];
        match self.0.read(&mut buf) {
            Ok(0) => Err("end of output".into()),
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(format!("reading the PTY: {e}")),
        }
    }
}

struct FrameEcho(FrameReader);

impl Echo for FrameEcho {
    fn send(&mut self, bytes: &[u8]) -> Res<()> {
        client::send_frame(self.0.stream(), frame::client::INPUT, bytes).map_err(|e| e.to_string())
    }

    fn recv(&mut self, out: &mut Vec<u8>) -> Res<()> {
        match self.0.next_blocking().map_err(|e| e.to_string())? {
            Some(ServerFrame::Output(bytes)) => {
                out.extend_from_slice(&bytes);
                Ok(())
            }
            Some(ServerFrame::Exit(v)) => Err(format!("attachment ended: {v}")),
            None => Err("the server closed the connection".into()),
        }
    }
}

/// Waits for `READY`, then types `keys` letters one at a time, timing each
/// until it shows up in the output's text (escape sequences stripped, which
/// tmux's redraws are full of).
fn measure_echo(t: &mut dyn Echo, keys: usize) -> Res<Latency> {
    let mut strip = Stripper::default();
    let mut raw = Vec::new();
    let mut text = Vec::new();
    let deadline = Instant::now() + STUCK;
    while !text.windows(5).any(|w| w == b"READY") {
        if Instant::now() > deadline {
            return Err("the echo program never printed READY".into());
        }
        raw.clear();
        t.recv(&mut raw)?;
        strip.feed(&raw, &mut text);
    }
    let mut samples = Vec::with_capacity(keys);
    let mut col = 5;
    let mut skip_next = WARMUP_KEYS;
    let mut n = 0usize;
    while samples.len() < keys {
        // Back to column 0 well before the line would wrap: a wrap or scroll
        // makes tmux redraw, and a redrawn letter would look like an echo.
        // The key after the CR carries its cost and is not counted.
        if col >= usize::from(COLS) - 20 {
            t.send(b"\r")?;
            col = 0;
            skip_next = skip_next.max(1);
        }
        let key = b'a' + (n % 26) as u8;
        n += 1;
        text.clear();
        let t0 = Instant::now();
        t.send(&[key])?;
        while !text.contains(&key) {
            raw.clear();
            t.recv(&mut raw)
                .map_err(|e| format!("waiting for the echo of {:?}: {e}", key as char))?;
            strip.feed(&raw, &mut text);
        }
        let dt = t0.elapsed();
        col += 1;
        if skip_next > 0 {
            skip_next -= 1;
        } else {
            samples.push(dt);
        }
    }
    Ok(latency_stats(samples))
}

fn latency_bare(keys: usize) -> Res<Latency> {
    let mut p = PtyProc::spawn(&["sh", "-c", ECHO_SCRIPT], &[])?;
    measure_echo(&mut PtyEcho(&mut p.master), keys)
}

fn latency_ptyd(server: &PtydServer, tmp: &Path, keys: usize) -> Res<Latency> {
    let reader = server.create_attached(json!({
        "argv": ["sh", "-c", ECHO_SCRIPT],
        "attach": true,
        "cols": COLS,
        "rows": ROWS,
        "cwd": path_str(tmp)?,
    }))?;
    reader
        .stream()
        .set_read_timeout(Some(KEY_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let mut echo = FrameEcho(reader);
    let result = measure_echo(&mut echo, keys);
    // Detach; the pane goes with the server.
    let _ = client::send_frame(echo.0.stream(), frame::client::DETACH, &[]);
    result
}

fn latency_tmux(tmp: &Path, keys: usize) -> Res<Latency> {
    let tmux = Tmux::new(tmp, "lat")?;
    tmux.new_session(ECHO_SCRIPT)?;
    let mut client = tmux.attach_client()?;
    tmux.wait_client()?;
    let result = measure_echo(&mut PtyEcho(&mut client.master), keys);
    drop(tmux);
    drop(client);
    result
}

/// Drops escape sequences (CSI, OSC, DCS and friends, two-byte ESC forms)
/// and control characters, keeping printable bytes.
#[derive(Default)]
struct Stripper {
    state: StripState,
}

#[derive(Default, Clone, Copy)]
enum StripState {
    #[default]
    Ground,
    Esc,
    EscIntermediate,
    Csi,
    Str,
    StrEsc,
}

impl Stripper {
    fn feed(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
        use StripState::*;
        for &b in bytes {
            self.state = match (self.state, b) {
                (Ground, 0x1b) => Esc,
                (Ground, b) => {
                    if b >= 0x20 && b != 0x7f {
                        out.push(b);
                    }
                    Ground
                }
                (Esc, b'[') => Csi,
                (Esc, b']' | b'P' | b'_' | b'^' | b'X') => Str,
                (Esc, 0x20..=0x2f) => EscIntermediate,
                (Esc, _) | (EscIntermediate, _) => Ground,
                (Csi, 0x40..=0x7e) => Ground,
                (Csi, _) => Csi,
                (Str, 0x07) => Ground,
                (Str, 0x1b) => StrEsc,
                (Str, _) => Str,
                (StrEsc, b'\\') => Ground,
                (StrEsc, _) => Str,
            };
        }
    }
}
