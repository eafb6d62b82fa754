//! The live-upgrade measurement: blackout and total time of
//! `server.upgrade` against a server holding many panes with full
//! scrollback (see `benches/upgrade.rs` for what is measured and why).

use super::server::{PaneProc, PtydServer, STUCK, wait_all};
use super::{Res, ms, start_time, thread_cpu};
use ptyd::client::{self, Client};
use serde_json::{Value, json};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::{Duration, Instant};

pub const COLS: u16 = 80;
pub const ROWS: u16 = 24;
/// The last line each pane prints; its appearance means the scrollback is
/// complete.
pub const MARKER: &str = "ptyd-bench-ready";
/// The old server's probation after an upgrade (`upgrade::PROBATION`): no
/// point asking again sooner.
pub const PROBATION: Duration = Duration::from_secs(2);
/// How often to ask again while the answer is `busy`.
const BUSY_RETRY: Duration = Duration::from_millis(20);
/// The blackout goals: (panes, ms).
pub const TARGETS: &[(usize, f64)] = &[(100, 10.0), (1000, 100.0)];

pub fn target_for(panes: usize) -> Option<f64> {
    TARGETS.iter().find(|(p, _)| *p == panes).map(|(_, t)| *t)
}

/// How many upgrades to measure per pane count and how much scrollback
/// each pane holds.
pub struct Plan {
    pub upgrades: usize,
    pub lines: usize,
    /// Also run the in-process cost model.
    pub model: bool,
}

/// Writes `lines` lines: numbers (padded with text to `line_len` if that
/// is longer), the last one [`MARKER`]. Returns the byte count.
pub fn generate(path: &Path, lines: usize, line_len: usize) -> Res<usize> {
    let filler = b"the quick brown fox jumps over the lazy dog 0123456789 ";
    let mut w = BufWriter::new(File::create(path).map_err(|e| e.to_string())?);
    let mut total = 0;
    let mut line = Vec::new();
    for i in 1..lines {
        line.clear();
        write!(line, "{i}").map_err(|e| e.to_string())?;
        let mut k = i % filler.len();
        while line.len() < line_len {
            line.push(filler[k]);
            k = (k + 1) % filler.len();
        }
        line.push(b'\n');
        w.write_all(&line).map_err(|e| e.to_string())?;
        total += line.len();
    }
    writeln!(w, "{MARKER}").map_err(|e| e.to_string())?;
    w.flush().map_err(|e| e.to_string())?;
    Ok(total + MARKER.len() + 1)
}

// ---------------------------------------------------------------- measuring

/// Everything measured for one pane count.
pub struct Measurement {
    pub panes: usize,
    pub setup: Duration,
    pub scrollback: (u64, u64),
    pub warmup: Sample,
    pub samples: Vec<Sample>,
    pub busy_retries: usize,
    pub manifest_bytes: Vec<u64>,
    pub fds_before: FdCount,
    pub fds_after: FdCount,
    /// Pane processes found alive after the stop (killed by the guard).
    pub leftovers: usize,
    pub model: Res<ModelCost>,
}

/// One upgrade.
pub struct Sample {
    /// Client-observed round trip of the successful `server.upgrade`.
    pub total: Duration,
    pub report: Value,
    /// Scheduler accounting of the old server across the call.
    pub old_sched: Sched,
    /// Of the new server from its start until the answer arrived.
    pub new_sched: Sched,
}

/// Time a process's threads spent on a CPU and waiting in a run queue for
/// one (`/proc/PID/task/*/schedstat`, nanoseconds).
#[derive(Clone, Copy, Default)]
pub struct Sched {
    pub on_cpu: Duration,
    pub waiting: Duration,
}

impl Sched {
    pub fn of(pid: u32) -> Sched {
        let mut sum = Sched::default();
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return sum;
        };
        for t in tasks.flatten() {
            let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) else {
                continue;
            };
            let mut f = s.split_whitespace().map(|v| v.parse::<u64>().unwrap_or(0));
            sum.on_cpu += Duration::from_nanos(f.next().unwrap_or(0));
            sum.waiting += Duration::from_nanos(f.next().unwrap_or(0));
        }
        sum
    }

    pub fn since(self, earlier: Sched) -> Sched {
        Sched {
            on_cpu: self.on_cpu.saturating_sub(earlier.on_cpu),
            waiting: self.waiting.saturating_sub(earlier.waiting),
        }
    }
}

impl Sample {
    pub fn blackout_ms(&self) -> f64 {
        self.report["blackout_ms"].as_f64().unwrap_or(f64::NAN)
    }

    pub fn total_ms(&self) -> f64 {
        ms(self.total)
    }
}

pub fn measure(
    bin: &Path,
    tmp: &Path,
    nofile: u64,
    panes: usize,
    plan: &Plan,
    file: &Path,
) -> Res<Measurement> {
    let mut server = PtydServer::start(bin, tmp, nofile)?;
    let mut ctl = server.connect()?;
    let t0 = Instant::now();
    let ids = server.create_cat_panes(&mut ctl, panes, file, tmp, (COLS, ROWS))?;
    wait_all(&mut ctl, &ids, MARKER)?;
    let setup = t0.elapsed();
    let scrollback_before = scrollback_lines(&mut ctl, &ids[0])?;
    if scrollback_before < plan.lines as u64 {
        return Err(format!(
            "pane {} holds {scrollback_before} lines of scrollback, not {}",
            ids[0], plan.lines
        ));
    }
    let first_pid = server.serving_pid;
    let fds_before = FdCount::of(first_pid)?;

    let mut manifest_bytes = Vec::new();
    let mut busy_retries = 0;
    let mut samples = Vec::with_capacity(plan.upgrades + 1);
    for i in 0..=plan.upgrades {
        let (sample, retries, manifest) = upgrade_server(&mut server, &mut ctl, panes, i > 0)
            .map_err(|e| format!("upgrade {i}: {e}"))?;
        busy_retries += retries;
        manifest_bytes.extend(manifest);
        samples.push(sample);
    }
    let warmup = samples.remove(0);
    let fds_after = FdCount::of(server.serving_pid)?;
    let scrollback_after = scrollback_lines(&mut ctl, &ids[ids.len() - 1])?;
    drop(ctl);
    let leftovers = server.stop()?;
    let model = if plan.model {
        model_cost(panes, file)
    } else {
        Err("not run".into())
    };
    Ok(Measurement {
        model,
        panes,
        setup,
        scrollback: (scrollback_before, scrollback_after),
        warmup,
        samples,
        busy_retries,
        manifest_bytes,
        fds_before,
        fds_after,
        leftovers,
    })
}

/// Upgrades `server` (holding `panes` panes) to the same binary once and
/// follows it to the new generation; the sample, the busy retries, and the
/// manifest size if the old server still holds it.
pub fn upgrade_server(
    server: &mut PtydServer,
    ctl: &mut Client,
    panes: usize,
    after_probation: bool,
) -> Res<(Sample, usize, Option<u64>)> {
    let old_pid = server.serving_pid;
    let (sample, retries) = upgrade_once(ctl, old_pid, after_probation)?;
    let r = &sample.report;
    // The report says (servers before it did not: the old server then
    // still held the memfd when the call returned).
    let manifest = r["manifest_bytes"]
        .as_u64()
        .or_else(|| memfd_size(old_pid, "ptyd-manifest"));
    let new_pid = r["new_pid"]
        .as_u64()
        .ok_or_else(|| format!("the report has no new_pid: {r}"))? as u32;
    if r["panes"].as_u64() != Some(panes as u64) || new_pid == old_pid {
        return Err(format!("unexpected report {r}"));
    }
    server.serving_pid = new_pid;
    server.serving = Some(PaneProc {
        pid: new_pid as i32,
        sid: new_pid as i32,
        start_token: start_time(new_pid),
    });
    Ok((sample, retries, manifest))
}

/// One `server.upgrade` to the same binary, asked again while the answer
/// is `busy` (the previous upgrade's probation); only the successful call
/// is timed. With `after_probation`, first sleeps out the probation rather
/// than polling through all of it.
pub fn upgrade_once(ctl: &mut Client, old_pid: u32, after_probation: bool) -> Res<(Sample, usize)> {
    if after_probation {
        std::thread::sleep(PROBATION);
    }
    let deadline = Instant::now() + STUCK;
    let mut retries = 0;
    loop {
        let before = Sched::of(old_pid);
        let t0 = Instant::now();
        match ctl.call("server.upgrade", json!({})) {
            Ok(report) => {
                let total = t0.elapsed();
                let old_sched = Sched::of(old_pid).since(before);
                let new_sched = report["new_pid"]
                    .as_u64()
                    .map_or_else(Sched::default, |p| Sched::of(p as u32));
                let sample = Sample {
                    total,
                    report,
                    old_sched,
                    new_sched,
                };
                return Ok((sample, retries));
            }
            Err(e) if e.refused("busy") && Instant::now() < deadline => {
                retries += 1;
                std::thread::sleep(BUSY_RETRY);
            }
            Err(e) => return Err(format!("server.upgrade: {} ({})", e.message, e.code())),
        }
    }
}

pub fn scrollback_lines(ctl: &mut Client, pane: &str) -> Res<u64> {
    let cap = ctl
        .call("pane.capture", json!({ "target": pane }))
        .map_err(|e| format!("pane.capture: {e}"))?;
    if !client::capture_lines(&cap).contains(&MARKER) {
        return Err(format!("pane {pane} no longer shows {MARKER:?}"));
    }
    cap["scrollback_lines"]
        .as_u64()
        .ok_or_else(|| format!("pane.capture has no scrollback_lines: {cap}"))
}

/// Fds of a process: how many are PTY masters, and all of them.
#[derive(Clone, Copy)]
pub struct FdCount {
    pub pid: u32,
    pub ptmx: usize,
    pub total: usize,
}

impl FdCount {
    pub fn of(pid: u32) -> Res<FdCount> {
        let dir = format!("/proc/{pid}/fd");
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("reading {dir}: {e}"))?;
        let (mut ptmx, mut total) = (0, 0);
        for e in entries.flatten() {
            total += 1;
            if let Ok(target) = std::fs::read_link(e.path())
                && (target == Path::new("/dev/ptmx") || target == Path::new("/dev/pts/ptmx"))
            {
                ptmx += 1;
            }
        }
        Ok(FdCount { pid, ptmx, total })
    }
}

/// The size of a memfd named `name` that process `pid` holds open, if any.
pub fn memfd_size(pid: u32, name: &str) -> Option<u64> {
    let prefix = format!("/memfd:{name}");
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()?
        .flatten()
        .find(|e| {
            std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy().starts_with(&prefix))
        })
        .and_then(|e| std::fs::metadata(e.path()).ok())
        .map(|m| m.len())
}

// ---------------------------------------------------------------- cost model

/// How often the in-process cost model is repeated (the best run counts).
pub const MODEL_RUNS: usize = 3;

/// What the terminal models alone cost, in this process, without the
/// server, sockets or other load in between: the floor for the capture and
/// import phases.
pub struct ModelCost {
    pub encode: Duration,
    pub decode: Duration,
    pub drop: Duration,
    pub bytes: usize,
}

/// Builds `panes` terminals fed what the bench's panes print (with the
/// tty's CR before each LF), then times their JSON round trip as the
/// manifest carries them.
pub fn model_cost(panes: usize, file: &Path) -> Res<ModelCost> {
    use ptyd::term::{TermConfig, Terminal};
    let text = std::fs::read(file).map_err(|e| e.to_string())?;
    let mut output = Vec::with_capacity(text.len() * 11 / 10);
    for &b in &text {
        if b == b'\n' {
            output.push(b'\r');
        }
        output.push(b);
    }
    let mut forward = Vec::new();
    let terms: Vec<Terminal> = (0..panes)
        .map(|_| {
            let mut t = Terminal::new(COLS, ROWS, TermConfig::default());
            t.feed(&output, &mut forward);
            forward.clear();
            t
        })
        .collect();
    let mut best: Option<ModelCost> = None;
    for _ in 0..MODEL_RUNS {
        let t0 = thread_cpu();
        let bytes = serde_json::to_vec(&terms).map_err(|e| e.to_string())?;
        let t1 = thread_cpu();
        let back: Vec<Terminal> = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
        let t2 = thread_cpu();
        drop(back);
        let (encode, decode, drop) = (t1 - t0, t2 - t1, thread_cpu() - t2);
        let run = ModelCost {
            encode,
            decode,
            drop,
            bytes: bytes.len(),
        };
        best = Some(match best {
            Some(b) => ModelCost {
                encode: b.encode.min(run.encode),
                decode: b.decode.min(run.decode),
                drop: b.drop.min(run.drop),
                bytes: run.bytes,
            },
            None => run,
        });
    }
    best.ok_or_else(|| "no run".into())
}
