//! A pane's recent raw output in shared memory, for crash recovery.
//!
//! Why: the keeper (`crate::keeper`) holds every pane's PTY master, so a
//! server that dies loses nothing the kernel had not yet delivered. But
//! what the dead server had read and fed into its terminal model since
//! the last checkpoint was only in its memory. So every byte read from a
//! pane is also copied here, into a memfd the keeper holds too; the
//! replacement server loads the checkpoint and replays this ring from the
//! position the checkpoint recorded. The copy is one `memcpy` per read
//! (no system call); the memfd's pages are allocated only as they are
//! first written.
//!
//! Layout: a 64-byte header (magic, capacity, total bytes ever written)
//! then `capacity` data bytes, written round and round. Only the one
//! server that owns the pane writes; a reader runs only after that
//! writer died (or in the same process), so a plain store suffices for
//! the counter, with release order so the bytes precede it.

use std::io;
#[cfg(test)]
use std::os::fd::FromRawFd;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

const MAGIC: u64 = 0x7074_7964_7269_6e67; // "ptydring"
const HEADER: usize = 64;
/// Default data capacity per pane. A checkpoint is asked for when half of
/// it has been written since the last one, and a pane is not read further
/// while a whole ring's worth is unsaved (the PTY then holds the rest).
pub const DEFAULT_CAPACITY: usize = 16 << 20;
/// Overrides the capacity (bytes), for tests that need an overflow.
pub const CAPACITY_ENV: &str = "PTYD_RING_BYTES";

pub struct OutputRing {
    fd: OwnedFd,
    map: *mut u8,
    cap: usize,
    /// Bytes before this position have had their pages given back
    /// (`release_before`).
    released: u64,
    /// The data area from `written()` up to this position is known to be
    /// zero (the part of the last reserved slot the read did not fill), so
    /// `reserve` need not zero it again. Means nothing when not past
    /// `written()`.
    zeroed: u64,
}

// SAFETY: the mapping is owned by this value alone and freed on drop; the
// pointer is never shared with another thread.
unsafe impl Send for OutputRing {}

impl std::fmt::Debug for OutputRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OutputRing({} of {})", self.written(), self.cap)
    }
}

/// The capacity for new rings: the environment's override, else the
/// default.
pub fn capacity() -> usize {
    std::env::var(CAPACITY_ENV)
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n >= 4096)
        .unwrap_or(DEFAULT_CAPACITY)
}

impl OutputRing {
    /// A new, empty ring of `cap` data bytes.
    pub fn create(cap: usize) -> io::Result<OutputRing> {
        let fd = crate::sys::anonymous_file(c"ptyd-ring", &[])?;
        let len = (HEADER + cap) as libc::off_t;
        // SAFETY: ftruncate on an fd we own.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len) } != 0 {
            return Err(context(
                "sizing the output ring",
                io::Error::last_os_error(),
            ));
        }
        let ring = OutputRing::map(fd, cap)?;
        ring.header()[0].store(MAGIC, Ordering::Relaxed);
        ring.header()[1].store(cap as u64, Ordering::Relaxed);
        ring.header()[2].store(0, Ordering::Release);
        ring.header()[3].store(0, Ordering::Release);
        Ok(ring)
    }

    /// Maps a ring another process made (handed over or held by the
    /// keeper), checking its header against its size.
    pub fn adopt(fd: OwnedFd) -> io::Result<OutputRing> {
        let size = std::fs::File::from(fd.try_clone()?).metadata()?.len() as usize;
        if size <= HEADER {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "output ring too small",
            ));
        }
        let ring = OutputRing::map(fd, size - HEADER)?;
        let h = ring.header();
        if h[0].load(Ordering::Relaxed) != MAGIC
            || h[1].load(Ordering::Relaxed) as usize != ring.cap
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not an output ring (bad header)",
            ));
        }
        Ok(ring)
    }

    fn map(fd: OwnedFd, cap: usize) -> io::Result<OutputRing> {
        // SAFETY: a fresh shared mapping of a file we hold, of its size;
        // no existing memory is touched.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                HEADER + cap,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(context(
                "mapping the output ring",
                io::Error::last_os_error(),
            ));
        }
        Ok(OutputRing {
            fd,
            map: map.cast(),
            cap,
            released: 0,
            zeroed: 0,
        })
    }

    fn header(&self) -> &[AtomicU64; 4] {
        // SAFETY: the mapping starts page-aligned and is at least HEADER
        // (64) bytes; AtomicU64 has the layout of u64.
        unsafe { &*(self.map as *const [AtomicU64; 4]) }
    }

    /// Where the next read goes: at most `max` bytes, contiguous (up to
    /// the end of the data area), zeroed, and recorded as pending in the
    /// header. The read goes straight into shared memory, so a server
    /// killed as the read returns (the usual moment for a signal to land)
    /// loses nothing: a replacement finds the bytes (`take_pending`).
    /// Only the part not known to be zero is zeroed (`zeroed`): a PTY read
    /// returns about 4 KiB of a 16 KiB slot, and one that finds nothing
    /// none, so zeroing whole slots cleared three times the bytes read.
    pub fn reserve(&mut self, max: usize) -> &mut [u8] {
        let written = self.written();
        let at = (written % self.cap as u64) as usize;
        let len = max.min(self.cap - at);
        let known = self.zeroed.saturating_sub(written).min(len as u64) as usize;
        self.zeroed = self.zeroed.max(written + len as u64);
        self.header()[3].store(len as u64, Ordering::Release);
        // SAFETY: at + len <= cap, inside our mapping's data area, which
        // only this value writes.
        let slot = unsafe { std::slice::from_raw_parts_mut(self.map.add(HEADER + at), len) };
        slot[known..].fill(0);
        slot
    }

    /// `n` bytes of the reserved slot were read.
    pub fn commit(&mut self, n: usize) {
        let w = self.header()[2].load(Ordering::Relaxed);
        self.header()[2].store(w + n as u64, Ordering::Release);
        self.header()[3].store(0, Ordering::Release);
    }

    /// The last `n` bytes committed (contiguous: one committed read).
    pub fn last(&self, n: usize) -> &[u8] {
        let end = (self.written() % self.cap as u64) as usize;
        let end = if end == 0 && n > 0 { self.cap } else { end };
        // SAFETY: [end - n, end) lies inside the data area: a read never
        // wraps, so its bytes end at `end` (or at the area's end).
        unsafe { std::slice::from_raw_parts(self.map.add(HEADER + end - n), n) }
    }

    /// After a crash: a read that returned into the ring but was never
    /// committed. Its length is where the zeroed slot's data ends
    /// (trailing NUL bytes are lost, which a terminal ignores anyway).
    /// Commits it; returns how many bytes it was.
    pub fn take_pending(&mut self) -> usize {
        let len = self.header()[3].load(Ordering::Acquire) as usize;
        let at = (self.written() % self.cap as u64) as usize;
        let len = len.min(self.cap - at);
        // SAFETY: [at, at + len) lies inside the data area.
        let slot = unsafe { std::slice::from_raw_parts(self.map.add(HEADER + at), len) };
        let n = slot.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        self.commit(n);
        n
    }

    /// Gives back the memory of the bytes before position `at`, which a
    /// checkpoint the keeper holds covers, so no reader needs them: whole
    /// pages only, each once. Without it, a pane's ring kept every byte it
    /// ever printed, up to its capacity (16 MiB), long after it was saved.
    /// A page given back reads as zeroes and is allocated again when the
    /// ring comes round to it.
    pub fn release_before(&mut self, at: u64) {
        const PAGE: usize = 4096;
        let at = at.min(self.written());
        let lo = self
            .released
            .max(self.written().saturating_sub(self.cap as u64));
        if at < lo + PAGE as u64 {
            return;
        }
        let mut pos = lo;
        while pos < at {
            let off = (pos % self.cap as u64) as usize;
            let n = ((at - pos) as usize).min(self.cap - off);
            // Inward to whole pages: the header's page is never among them.
            let from = (HEADER + off).div_ceil(PAGE) * PAGE;
            let to = (HEADER + off + n) / PAGE * PAGE;
            if to > from {
                let _ = crate::sys::punch_hole(&self.fd, from as u64, (to - from) as u64);
            }
            pos += n as u64;
        }
        // The page `at` is in still holds bytes after it: next time.
        let before = ((HEADER + (at % self.cap as u64) as usize) % PAGE) as u64;
        self.released = at.saturating_sub(before).max(lo);
    }

    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Total bytes ever written (the position of the next byte).
    pub fn written(&self) -> u64 {
        self.header()[2].load(Ordering::Acquire)
    }

    /// Appends `bytes` (the last `capacity` of them if longer). The loop
    /// reads straight into the ring instead (`reserve`, `commit`).
    #[cfg(test)]
    pub fn write(&mut self, bytes: &[u8]) {
        let start = self.header()[2].load(Ordering::Relaxed);
        let skip = bytes.len().saturating_sub(self.cap);
        let mut pos = start + skip as u64;
        let mut rest = &bytes[skip..];
        while !rest.is_empty() {
            let at = (pos % self.cap as u64) as usize;
            let n = rest.len().min(self.cap - at);
            // SAFETY: at + n <= cap, inside the data area of our mapping;
            // `rest` is ordinary memory, not overlapping it.
            unsafe {
                std::ptr::copy_nonoverlapping(rest.as_ptr(), self.map.add(HEADER + at), n);
            }
            pos += n as u64;
            rest = &rest[n..];
        }
        self.header()[2].store(start + bytes.len() as u64, Ordering::Release);
    }

    /// The bytes written since position `from`, and whether they are all
    /// there (false: the ring went round since, so only its last
    /// `capacity` bytes are returned).
    pub fn since(&self, from: u64) -> (Vec<u8>, bool) {
        let end = self.written();
        let from = from.min(end);
        let complete = end - from <= self.cap as u64;
        let start = if complete {
            from
        } else {
            end - self.cap as u64
        };
        let mut out = Vec::with_capacity((end - start) as usize);
        let mut pos = start;
        while pos < end {
            let at = (pos % self.cap as u64) as usize;
            let n = ((end - pos) as usize).min(self.cap - at);
            // SAFETY: at + n <= cap, inside our mapping's data area.
            out.extend_from_slice(unsafe {
                std::slice::from_raw_parts(self.map.add(HEADER + at), n)
            });
            pos += n as u64;
        }
        (out, complete)
    }
}

impl Drop for OutputRing {
    fn drop(&mut self) {
        // SAFETY: the mapping we made, of this length, unmapped once.
        unsafe { libc::munmap(self.map.cast(), HEADER + self.cap) };
    }
}

fn context(what: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// Wraps a raw fd received from elsewhere (tests).
#[cfg(test)]
fn owned(fd: i32) -> OwnedFd {
    // SAFETY: test-only, fd freshly duplicated.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_wrap_and_a_second_mapping_reads_them() {
        let mut ring = OutputRing::create(4096).unwrap();
        ring.write(b"hello ");
        let mark = ring.written();
        let big: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        ring.write(&big[..3000]);
        // SAFETY: dup of an fd we own.
        let dup = owned(unsafe { libc::dup(ring.fd().as_raw_fd()) });
        let other = OutputRing::adopt(dup).unwrap();
        assert_eq!(other.since(mark), (big[..3000].to_vec(), true));
        ring.write(&big[3000..]);
        let (tail, complete) = other.since(mark);
        assert!(!complete);
        assert_eq!(tail.len(), 4096);
        assert_eq!(&tail[..], &big[5000 - 4096..]);
        assert_eq!(other.since(other.written()), (Vec::new(), true));
    }

    #[test]
    fn a_read_never_committed_is_found_after_a_crash() {
        let mut ring = OutputRing::create(4096).unwrap();
        ring.write(b"abc");
        let slot = ring.reserve(16 * 1024);
        assert_eq!(slot.len(), 4093);
        slot[..5].copy_from_slice(b"hello");
        // The writer dies here; another process maps the ring.
        // SAFETY: dup of an fd we own.
        let dup = owned(unsafe { libc::dup(ring.fd().as_raw_fd()) });
        let mut other = OutputRing::adopt(dup).unwrap();
        assert_eq!(other.take_pending(), 5);
        assert_eq!(other.since(0), (b"abchello".to_vec(), true));
        assert_eq!(other.take_pending(), 0);
        let slot = other.reserve(10);
        slot[..2].copy_from_slice(b"xy");
        other.commit(2);
        assert_eq!(other.last(2), b"xy");
    }

    /// Every slot `reserve` hands out is all zeroes, however much of the
    /// one before was filled and wherever the ring is in its laps (with
    /// earlier laps' bytes under it).
    #[test]
    fn reserved_slots_are_always_zeroed() {
        let mut ring = OutputRing::create(4096).unwrap();
        let mut seed = 0x853c_49e6_748f_ea9bu64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..5000 {
            let max = 1 + (next() % 3000) as usize;
            let slot = ring.reserve(max);
            assert!(slot.iter().all(|&b| b == 0), "round {round}");
            let n = (next() % (slot.len() as u64 + 1)) as usize;
            // Non-zero bytes, so a stale one would show.
            slot[..n].fill(0xa5);
            ring.commit(n);
            if next() % 50 == 0 {
                ring.write(&[0x5a; 700]);
            }
        }
    }
}
