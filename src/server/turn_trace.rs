//! TEMPORARY (measurement for issue 17's slow connects): with
//! `PTYD_TURN_TRACE=PREFIX` each loop turn writes one CSV line to
//! `PREFIX.PID`: when it started, how long each pass took, and the
//! thread's CPU time and run delay (`/proc/thread-self/schedstat`) in poll
//! and in the turn, so a slow connect can be matched to the turns it
//! waited through.

use std::cell::RefCell;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::time::Instant;

pub const PHASES: usize = 7;
pub const POLL: usize = 0;
pub const EVENTS: usize = 1;
pub const FLUSH_OUTPUT: usize = 2;
pub const BACKLOG: usize = 3;
pub const TIMERS: usize = 4;
pub const KEEPER: usize = 5;
pub const FLUSH_CONNS: usize = 6;

struct Trace {
    out: BufWriter<File>,
    stat: File,
    last: Instant,
    phases: [u64; PHASES],
    /// schedstat (cpu ns, delay ns) at the turn's end (poll's start) and
    /// at poll's return.
    at_poll: (u64, u64),
    at_wake: (u64, u64),
    wake_unix_us: u64,
    listener: u32,
    events: u32,
    checkpoint_us: u64,
    checkpoint_parts: [u64; 4],
    turns: u64,
}

thread_local! {
    static TRACE: RefCell<Option<Trace>> = RefCell::new(open());
}

fn open() -> Option<Trace> {
    let prefix = std::env::var("PTYD_TURN_TRACE").ok()?;
    let out = File::create(format!("{prefix}.{}", std::process::id())).ok()?;
    let stat = File::open("/proc/thread-self/schedstat").ok()?;
    let mut t = Trace {
        out: BufWriter::with_capacity(1 << 16, out),
        stat,
        last: Instant::now(),
        phases: [0; PHASES],
        at_poll: (0, 0),
        at_wake: (0, 0),
        wake_unix_us: 0,
        listener: 0,
        events: 0,
        checkpoint_us: 0,
        checkpoint_parts: [0; 4],
        turns: 0,
    };
    t.at_poll = t.schedstat();
    let _ = writeln!(
        t.out,
        "wake_unix_us,poll_us,events_us,flush_output_us,backlog_us,timers_us,keeper_us,flush_conns_us,poll_cpu_us,poll_delay_us,turn_cpu_us,turn_delay_us,listener,events,checkpoint_us,ck_encode_us,ck_write_us,ck_manifest_send_us,ck_release_us"
    );
    Some(t)
}

impl Trace {
    fn schedstat(&self) -> (u64, u64) {
        let mut buf = [0u8; 96];
        let n = self.stat.read_at(&mut buf, 0).unwrap_or(0);
        let s = std::str::from_utf8(&buf[..n]).unwrap_or("");
        let mut it = s.split_whitespace().map(|v| v.parse::<u64>().unwrap_or(0));
        (it.next().unwrap_or(0), it.next().unwrap_or(0))
    }
}

/// The phase `phase` ended now (`POLL`: poll returned).
pub fn mark(phase: usize) {
    TRACE.with(|t| {
        let mut t = t.borrow_mut();
        let Some(t) = t.as_mut() else { return };
        let now = Instant::now();
        t.phases[phase] = (now - t.last).as_micros() as u64;
        t.last = now;
        if phase == POLL {
            t.at_wake = t.schedstat();
            t.wake_unix_us = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as u64);
        }
        if phase == FLUSH_CONNS {
            let end = t.schedstat();
            let line = format!(
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                t.wake_unix_us,
                t.phases[0],
                t.phases[1],
                t.phases[2],
                t.phases[3],
                t.phases[4],
                t.phases[5],
                t.phases[6],
                (t.at_wake.0 - t.at_poll.0) / 1000,
                (t.at_wake.1 - t.at_poll.1) / 1000,
                (end.0 - t.at_wake.0) / 1000,
                (end.1 - t.at_wake.1) / 1000,
                t.listener,
                t.events,
                t.checkpoint_us,
                t.checkpoint_parts[0],
                t.checkpoint_parts[1],
                t.checkpoint_parts[2],
                t.checkpoint_parts[3],
            );
            let _ = writeln!(t.out, "{line}");
            t.turns += 1;
            if t.turns % 64 == 0 {
                let _ = t.out.flush();
            }
            t.listener = 0;
            t.events = 0;
            t.checkpoint_us = 0;
            t.checkpoint_parts = [0; 4];
            t.at_poll = t.schedstat();
            t.last = Instant::now();
        }
    });
}

/// An event of this turn's batch (`listener`: the listening socket's).
pub fn event(listener: bool) {
    TRACE.with(|t| {
        if let Some(t) = t.borrow_mut().as_mut() {
            t.events += 1;
            t.listener += u32::from(listener);
        }
    });
}

/// A checkpoint was written this turn: its cost.
pub fn checkpoint(total_us: u64) {
    TRACE.with(|t| {
        if let Some(t) = t.borrow_mut().as_mut() {
            t.checkpoint_us += total_us;
        }
    });
}

/// Time spent in part `i` of the checkpoint being written.
pub fn checkpoint_part(i: usize, us: u64) {
    TRACE.with(|t| {
        if let Some(t) = t.borrow_mut().as_mut() {
            t.checkpoint_parts[i] += us;
        }
    });
}

pub fn flush() {
    TRACE.with(|t| {
        if let Some(t) = t.borrow_mut().as_mut() {
            let _ = t.out.flush();
        }
    });
}
