//! A pane's recent raw output in shared memory, for crash recovery.
//!
//! Why: the keeper (`keeper`) holds every pane's PTY master, so a
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
//!
//! The header is written with the first bytes, not when the ring is made:
//! any touch of a shared memfd mapping, a read too, allocates its page,
//! so writing it up front cost every pane 4 KiB before it printed
//! anything (a third of an idle pane's footprint). A ring whose file is
//! still a hole at the start is empty; until then this process answers
//! from its own memory, and looks at the file with `pread` (which reads
//! a hole as zeroes without allocating) to see whether another process
//! (the other side of a live upgrade) has written since: once when it is
//! mapped, and again only after `others_may_have_written` (the old server
//! serving again after a take-back or rollback).

use crate::sys::SharedMap;
use std::cell::Cell;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};

const MAGIC: u64 = 0x7074_7964_7269_6e67; // "ptydring"

/// Bumped when another process may have written this process's rings
/// since it last looked: the old server serving again after a live
/// upgrade's take-back (the new server served the panes meanwhile) or
/// rollback. A ring not yet live trusts its last look at its header
/// within one epoch: looking on every question cost an upgrade of 100
/// idle panes about 2,000 `pread`s, half a millisecond of its blackout.
static FOREIGN_EPOCH: AtomicU64 = AtomicU64::new(0);

/// Another process may have written into the rings this one maps (see
/// `FOREIGN_EPOCH`): the next question to a ring not yet live looks at
/// its file again.
pub fn others_may_have_written() {
    FOREIGN_EPOCH.fetch_add(1, Ordering::Relaxed);
}
const HEADER: usize = 64;
/// Default data capacity per pane. A checkpoint is asked for when half of
/// it has been written since the last one, and a pane is not read further
/// while a whole ring's worth is unsaved (the PTY then holds the rest).
pub const DEFAULT_CAPACITY: usize = 16 << 20;
/// Overrides the capacity (bytes), for tests that need an overflow.
pub const CAPACITY_ENV: &str = "PTYD_RING_BYTES";

pub struct OutputRing {
    fd: OwnedFd,
    /// The header's words (magic, capacity, written, pending) and the
    /// data area.
    map: SharedMap<{ HEADER / 8 }>,
    cap: usize,
    /// Bytes before this position have had their pages given back
    /// (`release_before`).
    released: u64,
    /// The header is in the file (written by us, or seen written by
    /// another process). Until then the ring is empty and its mapping is
    /// not touched (see the module doc).
    live: Cell<bool>,
    /// `FOREIGN_EPOCH + 1` when the file was last seen without a header
    /// (0: never looked).
    looked: Cell<u64>,
    /// The data area from `written()` up to this position is known to be
    /// zero (the part of the last reserved slot the read did not fill), so
    /// `reserve` need not zero it again. Means nothing when not past
    /// `written()`.
    zeroed: u64,
}

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
        crate::sys::set_file_len(&fd, (HEADER + cap) as u64)
            .map_err(|e| context("sizing the output ring", e))?;
        // The header waits for the first write (`make_live`).
        OutputRing::map(fd, cap)
    }

    /// Writes the header if no one has: the ring's first bytes follow.
    fn make_live(&mut self) {
        if self.is_live() {
            return;
        }
        let h = self.header();
        h[1].store(self.cap as u64, Ordering::Relaxed);
        h[2].store(0, Ordering::Relaxed);
        h[3].store(0, Ordering::Relaxed);
        h[0].store(MAGIC, Ordering::Release);
        self.live.set(true);
    }

    /// Whether the header is in the file. A ring not yet live is looked
    /// at with `pread` (its page stays unallocated), once per
    /// `FOREIGN_EPOCH`: until another process may have written, only this
    /// one's own writes make it live.
    fn is_live(&self) -> bool {
        if self.live.get() {
            return true;
        }
        let epoch = FOREIGN_EPOCH.load(Ordering::Relaxed) + 1;
        if self.looked.get() == epoch {
            return false;
        }
        let live = matches!(read_header(&self.fd), Ok(Some(_)));
        self.live.set(live);
        self.looked.set(epoch);
        live
    }

    /// Maps a ring another process made (handed over or held by the
    /// keeper), checking its header against its size.
    /// A ring whose header was never written is empty (nothing was
    /// ever written to it); one with a header must agree with its size.
    pub fn adopt(fd: OwnedFd) -> io::Result<OutputRing> {
        let size = std::fs::File::from(fd.try_clone()?).metadata()?.len() as usize;
        if size <= HEADER {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "output ring too small",
            ));
        }
        let cap = size - HEADER;
        let live = match read_header(&fd)? {
            None => false,
            Some(c) if c as usize == cap => true,
            Some(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "not an output ring (bad header)",
                ));
            }
        };
        let ring = OutputRing::map(fd, cap)?;
        ring.live.set(live);
        Ok(ring)
    }

    fn map(fd: OwnedFd, cap: usize) -> io::Result<OutputRing> {
        let map = SharedMap::new(&fd, cap).map_err(|e| context("mapping the output ring", e))?;
        Ok(OutputRing {
            fd,
            map,
            cap,
            released: 0,
            live: Cell::new(false),
            looked: Cell::new(0),
            zeroed: 0,
        })
    }

    /// Magic, capacity, bytes written, bytes pending (`reserve`); the
    /// other four words are unused.
    fn header(&self) -> &[AtomicU64; HEADER / 8] {
        self.map.header()
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
        self.make_live();
        let written = self.written();
        let at = (written % self.cap as u64) as usize;
        let len = max.min(self.cap - at);
        let known = self.zeroed.saturating_sub(written).min(len as u64) as usize;
        self.zeroed = self.zeroed.max(written + len as u64);
        self.header()[3].store(len as u64, Ordering::Release);
        // at + len <= cap: inside the data area, which only this value writes.
        let slot = &mut self.map.data_mut()[at..at + len];
        slot[known..].fill(0);
        slot
    }

    /// `n` bytes of the reserved slot were read.
    pub fn commit(&mut self, n: usize) {
        self.make_live();
        let w = self.header()[2].load(Ordering::Relaxed);
        self.header()[2].store(w + n as u64, Ordering::Release);
        self.header()[3].store(0, Ordering::Release);
    }

    /// The last `n` bytes committed (contiguous: one committed read).
    pub fn last(&self, n: usize) -> &[u8] {
        if n == 0 || !self.is_live() {
            return &[];
        }
        let end = (self.written() % self.cap as u64) as usize;
        let end = if end == 0 && n > 0 { self.cap } else { end };
        // A read never wraps, so its bytes end at `end` (or at the area's
        // end); a stale `n` larger than that gets what there is.
        &self.map.data()[end.saturating_sub(n)..end]
    }

    /// After a crash: a read that returned into the ring but was never
    /// committed. Its length is where the zeroed slot's data ends
    /// (trailing NUL bytes are lost, which a terminal ignores anyway).
    /// Commits it; returns how many bytes it was.
    pub fn take_pending(&mut self) -> usize {
        if !self.is_live() {
            return 0;
        }
        let len = self.header()[3].load(Ordering::Acquire) as usize;
        let at = (self.written() % self.cap as u64) as usize;
        let len = len.min(self.cap - at);
        let slot = &self.map.data()[at..at + len];
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
        if !self.is_live() {
            return 0;
        }
        self.header()[2].load(Ordering::Acquire)
    }

    /// Appends `bytes` (the last `capacity` of them if longer). The loop
    /// reads straight into the ring instead (`reserve`, `commit`).
    #[cfg(test)]
    pub fn write(&mut self, bytes: &[u8]) {
        self.make_live();
        let start = self.header()[2].load(Ordering::Relaxed);
        let skip = bytes.len().saturating_sub(self.cap);
        let mut pos = start + skip as u64;
        let mut rest = &bytes[skip..];
        while !rest.is_empty() {
            let at = (pos % self.cap as u64) as usize;
            let n = rest.len().min(self.cap - at);
            self.map.data_mut()[at..at + n].copy_from_slice(&rest[..n]);
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
            out.extend_from_slice(&self.map.data()[at..at + n]);
            pos += n as u64;
        }
        (out, complete)
    }
}

/// The capacity a ring's header records, or `None` when the file starts
/// with a hole (zeroes: no header yet), read with `pread` so a hole stays
/// unallocated; an error for a header that is not a ring's.
fn read_header(fd: &OwnedFd) -> io::Result<Option<u64>> {
    let mut h = [0u8; 16];
    let n = crate::sys::read_at(fd, &mut h, 0)
        .map_err(|e| context("reading the output ring's header", e))?;
    let word = |i: usize| u64::from_ne_bytes(h[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
    match (n, word(0)) {
        (16, MAGIC) => Ok(Some(word(1))),
        (_, 0) => Ok(None),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not an output ring (bad header)",
        )),
    }
}

fn context(what: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn writes_wrap_and_a_second_mapping_reads_them() {
        let mut ring = OutputRing::create(4096).unwrap();
        ring.write(b"hello ");
        let mark = ring.written();
        let big: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        ring.write(&big[..3000]);
        // SAFETY: dup of an fd we own.
        let dup = ring.fd().try_clone().expect("dup");
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
        let dup = ring.fd().try_clone().expect("dup");
        let mut other = OutputRing::adopt(dup).unwrap();
        assert_eq!(other.take_pending(), 5);
        assert_eq!(other.since(0), (b"abchello".to_vec(), true));
        assert_eq!(other.take_pending(), 0);
        let slot = other.reserve(10);
        slot[..2].copy_from_slice(b"xy");
        other.commit(2);
        assert_eq!(other.last(2), b"xy");
    }

    fn allocated(ring: &OutputRing) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::File::from(ring.fd().try_clone().unwrap())
            .metadata()
            .unwrap()
            .blocks()
    }

    /// An idle pane's ring costs no memory: nothing touches its mapping
    /// until the first read lands, not even the questions asked of it at
    /// checkpoints and hand-overs, nor a second process adopting it.
    #[test]
    fn a_ring_never_written_allocates_nothing() {
        let mut ring = OutputRing::create(8192).unwrap();
        assert_eq!(ring.written(), 0);
        assert_eq!(ring.since(0), (Vec::new(), true));
        assert_eq!(ring.take_pending(), 0);
        assert_eq!(ring.last(0), b"");
        ring.release_before(0);
        // SAFETY: dup of an fd we own.
        let dup = ring.fd().try_clone().expect("dup");
        let mut other = OutputRing::adopt(dup).unwrap();
        assert_eq!((other.written(), other.capacity()), (0, 8192));
        assert_eq!(other.take_pending(), 0);
        assert_eq!(allocated(&ring), 0, "no page of the memfd allocated");
        // The other side (a live upgrade's new server) writes first: the
        // ring that made the file sees its bytes.
        let slot = other.reserve(100);
        slot[..3].copy_from_slice(b"abc");
        other.commit(3);
        assert!(allocated(&ring) > 0);
        // Seen once this process is told another may have written (as
        // the old server's resume after a take-back tells it).
        others_may_have_written();
        assert_eq!(ring.written(), 3);
        assert_eq!(ring.since(0), (b"abc".to_vec(), true));
        ring.write(b"de");
        assert_eq!(other.since(1), (b"bcde".to_vec(), true));
        // And a third mapping finds the header written.
        // SAFETY: dup of an fd we own.
        let dup = ring.fd().try_clone().expect("dup");
        assert_eq!(OutputRing::adopt(dup).unwrap().written(), 5);
    }

    /// A file that is not a ring is refused, as before.
    #[test]
    fn a_foreign_header_is_refused() {
        let ring = OutputRing::create(4096).unwrap();
        let junk = [1u8; 16];
        // SAFETY: writes 16 bytes from a buffer of that size to an fd we own.
        let n = unsafe { libc::pwrite(ring.fd().as_raw_fd(), junk.as_ptr().cast(), 16, 0) };
        assert_eq!(n, 16);
        // SAFETY: dup of an fd we own.
        let dup = ring.fd().try_clone().expect("dup");
        assert!(OutputRing::adopt(dup).is_err());
    }

    /// Every slot `reserve` hands out is all zeroes, however much of the
    /// one before was filled and wherever the ring is in its laps (with
    /// earlier laps' bytes under it).
    #[test]
    fn reserved_slots_are_always_zeroed() {
        let mut ring = OutputRing::create(4096).unwrap();
        let mut next = crate::xorshift(0x853c_49e6_748f_ea9bu64);
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
