//! What the benchmarks share: machine facts for the report header, fd and
//! process plumbing, argument parsing, statistics, and (in the submodules)
//! the measurements themselves, so `report` runs the same code as the
//! single-purpose benches. Each bench uses a subset, hence the allowance
//! below.
#![allow(dead_code)]

pub mod crash;
pub mod echo;
pub mod pace;
pub mod persist;
pub mod pty;
pub mod relay;
pub mod server;
pub mod term;
pub mod throughput;
pub mod tmux;
pub mod upgrade;
pub mod upgrade_load;

use std::io;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub type Res<T> = Result<T, String>;

pub fn nproc() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

pub fn set_cloexec(fd: RawFd) -> Res<()> {
    // SAFETY: fcntl on an fd we own.
    let ok = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFD);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) >= 0
    };
    if ok {
        Ok(())
    } else {
        Err(format!("fcntl: {}", io::Error::last_os_error()))
    }
}

/// Waits until `fd` is readable; false on timeout.
pub fn wait_readable(fd: RawFd, timeout: Duration) -> Res<bool> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    loop {
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r >= 0 {
            return Ok(r > 0);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(format!("poll: {e}"));
        }
    }
}

pub fn path_str(p: &Path) -> Res<&str> {
    p.to_str()
        .ok_or_else(|| format!("path {} is not UTF-8", p.display()))
}

pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

pub fn parse_num(v: Result<std::ffi::OsString, lexopt::Error>, what: &str) -> Res<usize> {
    let v = v.map_err(|e| e.to_string())?;
    let s = v.to_string_lossy();
    s.parse()
        .map_err(|_| format!("{what} wants a whole number, got {s:?}"))
}

/// With `PTYD_BENCH_KEEP=1` the temporary directory (server logs, data) is
/// left in place and its path printed, for looking into a failure.
pub fn keep_dir(dir: tempfile::TempDir) {
    if std::env::var_os("PTYD_BENCH_KEEP").is_some() {
        eprintln!("keeping {}", dir.keep().display());
    }
}

/// The ptyd binary to measure: `PTYD_BIN`, else the one beside this bench
/// in the target directory.
pub fn find_ptyd() -> Res<PathBuf> {
    let how = "build it first with `cargo build --release` (or point PTYD_BIN at a ptyd binary)";
    if let Some(p) = std::env::var_os("PTYD_BIN") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("PTYD_BIN={} is not a file; {how}", p.display()))
        };
    }
    if let Some(p) = option_env!("CARGO_BIN_EXE_ptyd").map(PathBuf::from)
        && p.is_file()
    {
        return Ok(p);
    }
    // A bench runs as target/<profile>/deps/NAME-HASH.
    let exe = std::env::current_exe().map_err(|e| format!("finding this executable: {e}"))?;
    let candidate = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("ptyd"))
        .ok_or("this executable has no parent directory")?;
    if candidate.is_file() {
        Ok(candidate)
    } else {
        Err(format!("no ptyd binary at {}; {how}", candidate.display()))
    }
}

/// CPU time (user + system) of process `pid` so far.
pub fn process_cpu(pid: u32) -> Option<Duration> {
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

/// The state and kernel start time of process `pid` (`/proc/PID/stat`
/// fields 3 and 22).
pub fn proc_stat(pid: u32) -> Option<(String, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name, which may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some((fields.first()?.to_string(), fields.get(19)?.parse().ok()?))
}

pub fn start_time(pid: u32) -> Option<u64> {
    proc_stat(pid).map(|(_, start)| start)
}

/// What a group of processes (a server and its keeper) holds in memory,
/// each page once: shared memory counted whether it is mapped or not, so
/// none can hide in a memfd (`VmRSS` counts a memfd's pages only where a
/// process maps them, and once per process that does; not at all where one
/// only holds its fd, as ptyd's keeper holds the crash checkpoints), and
/// pages two processes share (the binary's, those a fork left shared)
/// split between them, as PSS does, instead of counted in each.
#[derive(Clone, Copy, Debug, Default)]
pub struct Footprint {
    /// `Pss_Anon` + `Pss_File` (/proc/PID/smaps_rollup) of every process:
    /// heap, stacks, the binary's pages.
    pub private: u64,
    /// `Pss_Shmem` of every process: shared memory mapped and touched.
    pub shmem_mapped: u64,
    /// Pages allocated in the memfds the processes hold open or map, each
    /// file counted once.
    pub memfd: u64,
}

impl Footprint {
    /// Everything, each page once: the private parts plus the memfds (or
    /// what is mapped, if more: shared memory that is not a memfd we
    /// found).
    pub fn total(&self) -> u64 {
        self.private + self.memfd.max(self.shmem_mapped)
    }
}

/// The [`Footprint`] of `pids` together.
pub fn footprint(pids: &[u32]) -> Res<Footprint> {
    use std::os::unix::fs::MetadataExt;
    let mut f = Footprint::default();
    let mut seen = std::collections::HashSet::new();
    for &pid in pids {
        let path = format!("/proc/{pid}/smaps_rollup");
        let rollup = std::fs::read_to_string(&path).map_err(|e| format!("reading {path}: {e}"))?;
        let kib = |key: &str| -> Res<u64> {
            rollup
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .map(|k| k * 1024)
                .ok_or_else(|| format!("{path} has no {key} line"))
        };
        f.private += kib("Pss_Anon:")? + kib("Pss_File:")?;
        f.shmem_mapped += kib("Pss_Shmem:")?;
        // Memfds held open, then those mapped (an fd may be closed while
        // its mapping lives on).
        let mut files = Vec::new();
        let fds = format!("/proc/{pid}/fd");
        for e in std::fs::read_dir(&fds)
            .map_err(|e| format!("reading {fds}: {e}"))?
            .flatten()
        {
            if std::fs::read_link(e.path())
                .is_ok_and(|t| t.to_string_lossy().starts_with("/memfd:"))
            {
                files.push(e.path());
            }
        }
        let maps = format!("/proc/{pid}/maps");
        let maps = std::fs::read_to_string(&maps).map_err(|e| format!("reading {maps}: {e}"))?;
        for line in maps.lines().filter(|l| l.contains("/memfd:")) {
            if let Some(range) = line.split_whitespace().next() {
                files.push(format!("/proc/{pid}/map_files/{range}").into());
            }
        }
        for file in files {
            // Gone meanwhile, or map_files refused (it needs privileges):
            // the mapped part is still in `shmem_mapped`.
            if let Ok(m) = std::fs::metadata(&file)
                && seen.insert((m.dev(), m.ino()))
            {
                f.memfd += m.blocks() * 512;
            }
        }
    }
    Ok(f)
}

/// Resident memory of process `pid` in bytes (`VmRSS` in
/// `/proc/PID/status`).
pub fn rss_bytes(pid: u32) -> Res<u64> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).map_err(|e| format!("reading {path}: {e}"))?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .ok_or_else(|| format!("{path} has no VmRSS line"))?;
    Ok(kib * 1024)
}

/// Memory of the files process `pid` holds that no process maps: the
/// keeper's crash checkpoint and history log (memfds written, not mapped,
/// so in no RSS). The output rings are left out: the serving process maps
/// them, so its RSS counts them. Each file once, by its allocated blocks.
pub fn unmapped_memfd_bytes(pid: u32) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    let mut seen = std::collections::HashSet::new();
    let mut total = 0;
    for e in dir.flatten() {
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        let target = target.to_string_lossy();
        let held = ["/memfd:ptyd-checkpoint", "/memfd:ptyd-history-log"];
        if !held.iter().any(|p| target.starts_with(p)) {
            continue;
        }
        if let Ok(m) = std::fs::metadata(e.path())
            && seen.insert(m.ino())
        {
            total += m.blocks() * 512;
        }
    }
    total
}

/// CPU time this thread has used: blind to the time other processes hold
/// the CPU, so in-process comparisons survive a loaded machine.
pub fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the valid timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// (soft, hard) limit of `resource`.
pub fn rlimit(resource: libc::__rlimit_resource_t) -> Res<(u64, u64)> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the valid rlimit we pass.
    if unsafe { libc::getrlimit(resource, &mut rl) } != 0 {
        return Err(format!("getrlimit: {}", io::Error::last_os_error()));
    }
    Ok((rl.rlim_cur, rl.rlim_max))
}

/// The RLIMIT_NOFILE servers get: the hard limit, capped at 65536.
pub fn raised_nofile() -> Res<u64> {
    let (_, hard) = rlimit(libc::RLIMIT_NOFILE)?;
    Ok(hard.min(65536))
}

pub fn fmt_limit(v: u64) -> String {
    if v == libc::RLIM_INFINITY {
        "unlimited".into()
    } else {
        v.to_string()
    }
}

/// Checks that this user may run `panes` more pane processes and servers
/// holding their fds.
pub fn check_limits(panes: usize) -> Res<()> {
    let nofile = raised_nofile()?;
    let nproc_limit = rlimit(libc::RLIMIT_NPROC)?;
    // One process per pane (sh execs sleep), a few server generations, and
    // whatever else this user runs: ask for plenty of headroom.
    if nproc_limit.0 < (panes as u64) * 2 + 200 {
        return Err(format!(
            "RLIMIT_NPROC (ulimit -u) is {}: too low for {panes} panes",
            fmt_limit(nproc_limit.0)
        ));
    }
    if nofile < (panes as u64) * 3 + 100 {
        return Err(format!(
            "RLIMIT_NOFILE hard limit is {nofile}: too low for {panes} panes (~3 fds each during an upgrade)"
        ));
    }
    Ok(())
}

pub struct Stats {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// Percentiles of a non-empty sample (NaN for an empty one).
pub fn stats(mut v: Vec<f64>) -> Stats {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return Stats {
            p50: f64::NAN,
            p99: f64::NAN,
            max: f64::NAN,
        };
    }
    let at = |q: usize| v[(v.len() * q / 100).min(v.len() - 1)];
    Stats {
        p50: at(50),
        p99: at(99),
        max: v[v.len() - 1],
    }
}

pub fn median(v: Vec<f64>) -> f64 {
    stats(v).p50
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

pub fn human_bytes(b: u64) -> String {
    if b >= 1 << 20 {
        format!("{:.1} MiB", b as f64 / (1 << 20) as f64)
    } else {
        format!("{:.1} KiB", b as f64 / 1024.0)
    }
}

/// Writes `bytes` bytes of printable `line_len`-byte lines (a line number,
/// then a rotating run of ASCII); returns the line count.
pub fn generate_lines(path: &Path, bytes: usize, line_len: usize) -> Res<usize> {
    use std::io::Write;
    let alphabet: Vec<u8> = (b' '..=b'~').collect();
    let file =
        std::fs::File::create(path).map_err(|e| format!("creating {}: {e}", path.display()))?;
    let mut w = io::BufWriter::with_capacity(1 << 20, file);
    let lines = bytes / line_len;
    let mut line = Vec::with_capacity(line_len);
    for i in 0..lines {
        line.clear();
        write!(line, "{i:010} ").map_err(|e| e.to_string())?;
        let mut k = i % alphabet.len();
        while line.len() < line_len - 1 {
            line.push(alphabet[k]);
            k = (k + 1) % alphabet.len();
        }
        line.push(b'\n');
        w.write_all(&line).map_err(|e| e.to_string())?;
    }
    w.flush().map_err(|e| e.to_string())?;
    Ok(lines)
}

/// Runs `cmd` to completion with its output captured, killing it after
/// `timeout`: every external wait in the benches is bounded.
pub fn output_within(
    mut cmd: std::process::Command,
    timeout: Duration,
    what: &str,
) -> Res<std::process::Output> {
    use std::process::Stdio;
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {what}: {e}"))?;
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(timeout) {
        Ok(out) => {
            let _ = waiter.join();
            out.map_err(|e| format!("waiting for {what}: {e}"))
        }
        Err(_) => {
            // SAFETY: kill has no memory-safety preconditions; the child is
            // not reaped until the waiter thread sees it exit.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let _ = waiter.join();
            Err(format!("{what} did not finish within {timeout:?}"))
        }
    }
}
