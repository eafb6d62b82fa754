//! Keystroke echo latency: one byte typed into a terminal, the time until
//! it comes back, against `cat` on a raw-mode terminal (so `cat` itself
//! echoes, as a shell's line editor would).

use super::{Res, wait_readable};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// The program the latency runs talk to: `cat` on a raw, non-echoing tty, so
/// the echo is `cat` writing back what it read.
pub const ECHO_SCRIPT: &str = "stty raw -echo; printf READY; exec cat";
/// How long one keystroke may take to echo before the run is declared stuck.
pub const KEY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the echo program may take to print READY.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Keystrokes typed before measuring (first-use costs: page faults, caches).
pub const WARMUP_KEYS: usize = 20;

/// Something we type bytes into and read the terminal output of.
pub trait Echo {
    fn send(&mut self, bytes: &[u8]) -> Res<()>;
    /// Blocks until there is output, appending it to `out`.
    fn recv(&mut self, out: &mut Vec<u8>) -> Res<()>;
}

impl<E: Echo + ?Sized> Echo for &mut E {
    fn send(&mut self, bytes: &[u8]) -> Res<()> {
        (**self).send(bytes)
    }

    fn recv(&mut self, out: &mut Vec<u8>) -> Res<()> {
        (**self).recv(out)
    }
}

/// The master side of a terminal: a bare PTY, or the one `ptyd attach` or
/// `tmux attach` runs in.
pub struct PtyEcho<'a>(pub &'a mut File);

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

/// A program in a PTY: typed into through the master.
impl Echo for super::pty::PtyProc {
    fn send(&mut self, bytes: &[u8]) -> Res<()> {
        PtyEcho(&mut self.master).send(bytes)
    }

    fn recv(&mut self, out: &mut Vec<u8>) -> Res<()> {
        PtyEcho(&mut self.master).recv(out)
    }
}

pub struct Latency {
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
    pub samples: usize,
}

pub fn latency_stats(mut samples: Vec<Duration>) -> Res<Latency> {
    samples.sort();
    let Some(&max) = samples.last() else {
        return Err("no samples".into());
    };
    let at = |q: usize| samples[(samples.len() * q / 100).min(samples.len() - 1)];
    Ok(Latency {
        p50: at(50),
        p99: at(99),
        max,
        samples: samples.len(),
    })
}

/// An echo program that has printed READY, ready to be typed into, in
/// rounds so several terminals can be measured interleaved.
pub struct EchoSession<E: Echo> {
    pub term: E,
    strip: Stripper,
    raw: Vec<u8>,
    text: Vec<u8>,
    col: usize,
    cols: usize,
    skip_next: usize,
    typed: usize,
    /// Type letters outside ASCII (two bytes each): for a terminal that
    /// also shows other panes' output, which is ASCII only.
    wide_keys: bool,
}

impl<E: Echo> EchoSession<E> {
    /// Waits for `READY` from a terminal `cols` wide.
    pub fn start(mut term: E, cols: u16) -> Res<EchoSession<E>> {
        let mut strip = Stripper::default();
        let mut raw = Vec::new();
        let mut text = Vec::new();
        let deadline = Instant::now() + START_TIMEOUT;
        while !text.windows(5).any(|w| w == b"READY") {
            if Instant::now() > deadline {
                return Err("the echo program never printed READY".into());
            }
            raw.clear();
            term.recv(&mut raw)?;
            strip.feed(&raw, &mut text);
        }
        Ok(EchoSession {
            term,
            strip,
            raw,
            text,
            col: 5,
            cols: usize::from(cols),
            skip_next: WARMUP_KEYS,
            typed: 0,
            wide_keys: false,
        })
    }

    /// Types `à`..`ú` instead of `a`..`z`: when the terminal also shows
    /// panes that flood ASCII text, an ASCII letter there would look like
    /// the echo.
    pub fn with_wide_keys(mut self) -> Self {
        self.wide_keys = true;
        self
    }

    /// The bytes of the next key, and advances the count.
    fn next_key(&mut self) -> ([u8; 4], usize) {
        let n = (self.typed % 26) as u32;
        self.typed += 1;
        let c = if self.wide_keys {
            char::from_u32(0xe0 + n).unwrap_or('a')
        } else {
            char::from_u32(u32::from(b'a') + n).unwrap_or('a')
        };
        let mut buf = [0u8; 4];
        let len = c.encode_utf8(&mut buf).len();
        (buf, len)
    }

    /// The next key is typed but not counted.
    pub fn skip_next_key(&mut self) {
        self.skip_next = self.skip_next.max(1);
    }

    /// Types `keys` letters one at a time (after the warm-up, the first
    /// time), timing each until it shows up in the output's text (escape
    /// sequences stripped, which tmux's redraws are full of).
    pub fn type_keys(&mut self, keys: usize) -> Res<Vec<Duration>> {
        let mut samples = Vec::with_capacity(keys);
        while samples.len() < keys {
            // Back to column 0 well before the line would wrap: a wrap or
            // scroll makes tmux redraw, and a redrawn letter would look like
            // an echo. The key after the CR carries its cost and is not
            // counted.
            if self.col + 20 >= self.cols {
                self.term.send(b"\r")?;
                self.col = 0;
                self.skip_next = self.skip_next.max(1);
            }
            let (buf, len) = self.next_key();
            let key = &buf[..len];
            self.text.clear();
            let t0 = Instant::now();
            self.term.send(key)?;
            while !self.text.windows(len).any(|w| w == key) {
                self.raw.clear();
                self.term.recv(&mut self.raw).map_err(|e| {
                    format!(
                        "waiting for the echo of {:?}: {e}",
                        String::from_utf8_lossy(key)
                    )
                })?;
                self.strip.feed(&self.raw, &mut self.text);
            }
            let dt = t0.elapsed();
            self.col += 1;
            if self.skip_next > 0 {
                self.skip_next -= 1;
            } else {
                samples.push(dt);
            }
        }
        Ok(samples)
    }
}

/// Waits for `READY`, then types `keys` letters one at a time; their
/// latency.
pub fn measure_echo(term: impl Echo, cols: u16, keys: usize) -> Res<Latency> {
    let mut s = EchoSession::start(term, cols)?;
    latency_stats(s.type_keys(keys)?)
}

/// Drops escape sequences (CSI, OSC, DCS and friends, two-byte ESC forms)
/// and control characters, keeping printable bytes.
#[derive(Default)]
pub struct Stripper {
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
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
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
