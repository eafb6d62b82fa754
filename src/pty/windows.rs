//! The Windows PTY backend: a pseudo console (ConPTY) per pane, its process
//! tree in a Job Object.
//!
//! What differs from Unix, and why:
//!
//! - **No pollable master.** A pseudo console talks through two anonymous
//!   pipes, which cannot be registered with the loop's poller (IOCP needs
//!   handles opened for overlapped I/O, and anonymous pipes never are). So
//!   each pane has a *reader* thread (blocking reads of the output pipe into
//!   a bounded queue) and a *writer* thread (a bounded queue of input into
//!   blocking writes). Both call the pane's [`Wake`] (a `mio::Waker` behind
//!   it) when the loop has something to do: output arrived or ended, or
//!   input room freed after a `write` was refused. `read` and `write` never
//!   block; the queues bound memory as the kernel's PTY buffer does on Unix
//!   (a loop that stops reading stalls the reader, then the program).
//! - **No SIGCHLD.** A third thread waits on the process handle and wakes
//!   the loop when the process exits; [`PtyMaster::exit_code`] then reads
//!   the code without blocking.
//! - **No sessions or signals.** Every process of the pane runs in one Job
//!   Object (the first is assigned while still suspended, and children join
//!   their parent's job), so [`PtyMaster::kill`] ends the whole tree at
//!   once, and the job's kill-on-close limit ends it when the pane (or the
//!   server) goes away, so nothing outlives it unseen. A killed process's
//!   exit code is [`KILLED_EXIT_CODE`].
//! - **Output does not end with the process.** The pseudo console's host
//!   keeps the output pipe open after its last client exits; it closes only
//!   when the console is closed. So after an exit the loop reads what is
//!   queued, then calls [`PtyMaster::hang_up`], after which `read` returns
//!   the rest and then `Ok(0)`, as a Unix master does once the slave side
//!   is gone. `ClosePseudoConsole` can block until the output pipe is
//!   drained (Windows 10 before 1903), so it runs on a thread of its own,
//!   and the reader keeps draining even after the `PtyMaster` is dropped.
//! - **Command lines, not argv.** Windows passes one string; each program
//!   splits it. [`command_line`] quotes argv by the MSVC rules most programs
//!   use, except cmd.exe's command after `/c` or `/k`, which cmd takes as
//!   typed and gets verbatim ([`super::shell_command`] builds the shell
//!   form that way). The program is looked up in the *child's* `PATH` (with
//!   `PATHEXT`), as on Unix, not in the server's.
//!
//! The child gets the pseudo console as its console and no inherited
//! handles: `STARTF_USESTDHANDLES` with none given, so a server whose own
//! stdio is redirected does not pass it on; Windows then binds the child's
//! standard handles to the pseudo console.
//!
//! Wine 8 (where CI runs this) binds no standard handles to a ConPTY
//! child and has no `ResizePseudoConsole` (`E_NOTIMPL`, reported as
//! `Unsupported`). The tests start their commands through a shim there
//! (`examples/conpty_shim.rs`); this backend does not adapt to Wine.

use super::{ChildProcess, SpawnSpec, Wake};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString, c_void};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::windows::ffi::{OsStrExt, OsStringExt};
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError, TrySendError};
use windows_sys::Win32::Foundation::{E_NOTIMPL, HANDLE, S_OK, WAIT_OBJECT_0};
use windows_sys::Win32::System::Console::{
    COORD, ClosePseudoConsole, CreatePseudoConsole, HPCON, ResizePseudoConsole,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    JOBOBJECT_BASIC_PROCESS_ID_LIST, JOBOBJECT_EXTENDED_LIMIT_INFORMATION,
    JobObjectBasicProcessIdList, JobObjectExtendedLimitInformation, QueryInformationJobObject,
    SetInformationJobObject, TerminateJobObject,
};
use windows_sys::Win32::System::Pipes::CreatePipe;
use windows_sys::Win32::System::Threading::{
    CREATE_SUSPENDED, CREATE_UNICODE_ENVIRONMENT, CreateProcessW, DeleteProcThreadAttributeList,
    EXTENDED_STARTUPINFO_PRESENT, GetExitCodeProcess, INFINITE, InitializeProcThreadAttributeList,
    LPPROC_THREAD_ATTRIBUTE_LIST, PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE, PROCESS_INFORMATION,
    ResumeThread, STARTF_USESTDHANDLES, STARTUPINFOEXW, TerminateProcess,
    UpdateProcThreadAttribute, WaitForSingleObject,
};

/// The exit code of processes ended by [`PtyMaster::kill`] (what
/// `taskkill /f` leaves too).
pub const KILLED_EXIT_CODE: u32 = 1;

/// The most bytes one queue entry holds, either way.
const CHUNK: usize = 64 * 1024;
/// Entries per queue: at most 1 MiB of output waits for the loop, and 1 MiB
/// of input for the pseudo console.
const QUEUE_CHUNKS: usize = 16;

/// What the reader thread queues.
enum Output {
    Bytes(Vec<u8>),
    /// The output pipe closed (`None`) or failed.
    End(Option<io::Error>),
}

/// The part of a queued chunk `read` has not returned yet.
#[derive(Default)]
struct Unread {
    chunk: Vec<u8>,
    at: usize,
    /// `End` was taken from the queue: `read` returns `Ok(0)` from now on.
    ended: bool,
}

/// A pane's pseudo console, its pipes' queues and its process tree.
pub struct PtyMaster {
    console: PseudoConsole,
    output: OutputQueue,
    input: InputQueue,
    process: Arc<OwnedHandle>,
    job: OwnedHandle,
}

impl std::fmt::Debug for PtyMaster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PtyMaster")
            .field("console", &self.console.0.get())
            .field("process", &self.process)
            .finish_non_exhaustive()
    }
}

impl PtyMaster {
    /// Returns queued output without blocking: `WouldBlock` when there is
    /// none yet, `Ok(0)` once output has ended (after [`hang_up`]), an
    /// error once if the pipe failed.
    ///
    /// [`hang_up`]: PtyMaster::hang_up
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.output.read(buf)
    }

    /// Queues up to 64 KiB of `buf` for the pseudo console and returns how
    /// much it took. `WouldBlock` when the queue is full (the pane's wake
    /// follows once there is room); `BrokenPipe` after a hang-up or once
    /// the console stopped taking input.
    pub fn write(&self, buf: &[u8]) -> io::Result<usize> {
        self.input.write(buf)
    }

    /// Sets the size the pane's programs see. Wine 8 does not implement it
    /// (`Unsupported`).
    pub fn resize(&self, cols: u16, rows: u16) -> io::Result<()> {
        let console = self.console.0.get();
        if console == 0 {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the pseudo console is closed",
            ));
        }
        // SAFETY: `console` is an open pseudo console (closed only through
        // `PseudoConsole::close`, which zeroes it first).
        let hr = unsafe { ResizePseudoConsole(console, coord(cols, rows)) };
        check_hresult("ResizePseudoConsole", hr)
    }

    /// The process's exit code once it has exited; `None` while it runs.
    /// Never blocks.
    pub fn exit_code(&self) -> Option<u32> {
        let process = self.process.as_raw_handle() as HANDLE;
        // SAFETY: `process` is our open process handle; a zero timeout
        // only tests its state.
        if unsafe { WaitForSingleObject(process, 0) } != WAIT_OBJECT_0 {
            return None;
        }
        let mut code = 0u32;
        // SAFETY: as above; `code` is writable.
        let ok = unsafe { GetExitCodeProcess(process, &mut code) } != 0;
        ok.then_some(code)
    }

    /// Ends every process of the pane (the whole job) with
    /// [`KILLED_EXIT_CODE`]. The exit is reported as any other.
    pub fn kill(&self) -> io::Result<()> {
        // SAFETY: `job` is our open job handle.
        let ok =
            unsafe { TerminateJobObject(self.job.as_raw_handle() as HANDLE, KILLED_EXIT_CODE) };
        if ok == 0 {
            return Err(os_error("TerminateJobObject"));
        }
        Ok(())
    }

    /// The ids of the processes in the pane's job, its process first if it
    /// still runs.
    pub fn processes(&self) -> io::Result<Vec<u32>> {
        // The list's header, then room for 1024 ids; a larger tree is cut
        // short (`NumberOfProcessIdsInList` < `NumberOfAssignedProcesses`).
        const ROOM: usize = 1024;
        let header = std::mem::size_of::<JOBOBJECT_BASIC_PROCESS_ID_LIST>();
        let mut buf = vec![0usize; header / 8 + ROOM + 1];
        let len = (buf.len() * std::mem::size_of::<usize>()) as u32;
        // SAFETY: `buf` is writable for `len` bytes and aligned for the
        // list (usize alignment, as its ULONG_PTR members need).
        let ok = unsafe {
            QueryInformationJobObject(
                self.job.as_raw_handle() as HANDLE,
                JobObjectBasicProcessIdList,
                buf.as_mut_ptr().cast(),
                len,
                std::ptr::null_mut(),
            )
        };
        if ok == 0 {
            return Err(os_error("QueryInformationJobObject"));
        }
        let list = buf.as_ptr().cast::<JOBOBJECT_BASIC_PROCESS_ID_LIST>();
        // SAFETY: the call filled the header; the ids follow it in `buf`
        // (a flexible array starting at `ProcessIdList`), as many as it
        // says it listed, which fit in `len`.
        let ids = unsafe {
            let n = ((*list).NumberOfProcessIdsInList as usize).min(ROOM);
            std::slice::from_raw_parts(std::ptr::addr_of!((*list).ProcessIdList).cast::<usize>(), n)
        };
        Ok(ids.iter().map(|&id| id as u32).collect())
    }

    /// Closes the pseudo console (on a thread of its own; see the module
    /// doc) and the input queue. Its programs get `CTRL_CLOSE_EVENT`; the
    /// output ends once what the console still had is read.
    pub fn hang_up(&self) {
        self.input.close();
        self.console.close();
    }
}

impl Drop for PtyMaster {
    /// The console closes (hang-up) and the job handle with it, whose
    /// kill-on-close limit ends whatever still runs in the pane.
    fn drop(&mut self) {
        self.hang_up();
    }
}

/// An open pseudo console; 0 once closed.
struct PseudoConsole(Cell<HPCON>);

impl PseudoConsole {
    fn close(&self) {
        let console = self.0.replace(0);
        if console == 0 {
            return;
        }
        let closing = std::thread::Builder::new()
            .name("ptyd-conpty-close".into())
            // SAFETY: `console` was open and is closed exactly once: the
            // cell was zeroed above, so no other call sees it again.
            .spawn(move || unsafe { ClosePseudoConsole(console) });
        if closing.is_err() {
            // No thread to spare: close it here, which may wait for the
            // reader to drain the output (it does, whoever holds the queue).
            // SAFETY: as above; the spawn failed, so the closure never ran.
            unsafe { ClosePseudoConsole(console) };
        }
    }
}

impl Drop for PseudoConsole {
    fn drop(&mut self) {
        self.close();
    }
}

fn coord(cols: u16, rows: u16) -> COORD {
    // Sizes are clamped to 1000x500 (`super::clamp_size`), within i16.
    COORD {
        X: cols.min(i16::MAX as u16) as i16,
        Y: rows.min(i16::MAX as u16) as i16,
    }
}

fn os_error(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn check_hresult(what: &str, hr: i32) -> io::Result<()> {
    if hr == S_OK {
        return Ok(());
    }
    if hr == E_NOTIMPL {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("{what}: not implemented by this Windows (E_NOTIMPL)"),
        ));
    }
    // HRESULT_FROM_WIN32: facility 7 carries a Win32 error code.
    if (hr as u32) & 0xFFFF_0000 == 0x8007_0000 {
        let e = io::Error::from_raw_os_error((hr as u32 & 0xFFFF) as i32);
        return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
    }
    Err(io::Error::other(format!(
        "{what}: HRESULT {:#010x}",
        hr as u32
    )))
}

/// Opens a pseudo console of the spec's size and starts the spec's program
/// in it, in a new job. `wake` is called from the pane's threads (see the
/// module doc). The console, its queues, threads and job belong to the
/// returned `PtyMaster`.
pub fn spawn(spec: &SpawnSpec, wake: Wake) -> io::Result<(PtyMaster, ChildProcess)> {
    spawn_inner(spec, wake).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("starting {:?} in {}: {e}", spec.program, spec.cwd.display()),
        )
    })
}

fn spawn_inner(spec: &SpawnSpec, wake: Wake) -> io::Result<(PtyMaster, ChildProcess)> {
    let application = resolve_program(spec)?;
    let mut command = wide_nul(&command_line(&spec.program, &spec.args), "the command line")?;
    let environment = environment_block(&spec.env)?;
    let cwd = wide_nul(spec.cwd.as_os_str(), "the directory")?;
    let application = wide_nul(application.as_os_str(), "the program")?;

    let (input_read, input_write) = pipe()?;
    let (output_read, output_write) = pipe()?;
    let mut console: HPCON = 0;
    // SAFETY: both pipe handles are open; `console` is writable. The pseudo
    // console duplicates the handles, so ours may close after the call.
    let hr = unsafe {
        CreatePseudoConsole(
            coord(spec.cols, spec.rows),
            input_read.as_raw_handle() as HANDLE,
            output_write.as_raw_handle() as HANDLE,
            0,
            &mut console,
        )
    };
    check_hresult("CreatePseudoConsole", hr)?;
    let console = PseudoConsole(Cell::new(console));
    drop((input_read, output_write));

    let job = kill_on_close_job()?;
    let attributes = ConsoleAttribute::new(console.0.get())?;
    // SAFETY: all-zero is a valid STARTUPINFOEXW (no handles, no strings).
    let mut startup: STARTUPINFOEXW = unsafe { std::mem::zeroed() };
    startup.StartupInfo.cb = std::mem::size_of::<STARTUPINFOEXW>() as u32;
    // No handles given: the child inherits none of ours (see the module doc).
    startup.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
    startup.lpAttributeList = attributes.list();
    // SAFETY: all-zero is a valid PROCESS_INFORMATION, filled by the call.
    let mut info: PROCESS_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: every string is NUL-terminated and lives until after the
    // call; `command` is mutable as CreateProcessW requires; the
    // environment block ends with two NULs and is UTF-16
    // (CREATE_UNICODE_ENVIRONMENT); `startup` holds an initialized
    // attribute list (EXTENDED_STARTUPINFO_PRESENT); no handles are
    // inherited.
    let ok = unsafe {
        CreateProcessW(
            application.as_ptr(),
            command.as_mut_ptr(),
            std::ptr::null(),
            std::ptr::null(),
            0,
            EXTENDED_STARTUPINFO_PRESENT | CREATE_UNICODE_ENVIRONMENT | CREATE_SUSPENDED,
            environment.as_ptr().cast::<c_void>(),
            cwd.as_ptr(),
            &startup.StartupInfo,
            &mut info,
        )
    };
    if ok == 0 {
        return Err(os_error("CreateProcessW"));
    }
    drop(attributes);
    // SAFETY: CreateProcessW succeeded, so both handles are open and ours.
    let (process, thread) = unsafe {
        (
            OwnedHandle::from_raw_handle(info.hProcess as _),
            OwnedHandle::from_raw_handle(info.hThread as _),
        )
    };
    // Into the job before it runs a single instruction, so every process
    // it starts is in the job too.
    // SAFETY: both handles are open.
    let assigned = unsafe {
        AssignProcessToJobObject(
            job.as_raw_handle() as HANDLE,
            process.as_raw_handle() as HANDLE,
        )
    };
    // SAFETY: `thread` is the suspended main thread, open.
    if assigned == 0 || unsafe { ResumeThread(thread.as_raw_handle() as HANDLE) } == u32::MAX {
        let e = os_error(if assigned == 0 {
            "AssignProcessToJobObject"
        } else {
            "ResumeThread"
        });
        // SAFETY: `process` is open; it never ran.
        unsafe { TerminateProcess(process.as_raw_handle() as HANDLE, KILLED_EXIT_CODE) };
        return Err(e);
    }
    drop(thread);
    let process = Arc::new(process);

    let output = OutputQueue::start(File::from(output_read), Arc::clone(&wake))?;
    let input = InputQueue::start(File::from(input_write), Arc::clone(&wake))?;
    start_exit_watcher(Arc::clone(&process), wake)?;

    let pid = info.dwProcessId as i32;
    Ok((
        PtyMaster {
            console,
            output,
            input,
            process,
            job,
        },
        ChildProcess {
            pid,
            sid: pid,
            start_token: None,
        },
    ))
}

/// An anonymous pipe (read end, write end), neither inheritable.
fn pipe() -> io::Result<(OwnedHandle, OwnedHandle)> {
    let mut read: HANDLE = std::ptr::null_mut();
    let mut write: HANDLE = std::ptr::null_mut();
    // SAFETY: both out-pointers are writable; no security attributes means
    // not inheritable; 0 asks for the default buffer size.
    if unsafe { CreatePipe(&mut read, &mut write, std::ptr::null(), 0) } == 0 {
        return Err(os_error("CreatePipe"));
    }
    // SAFETY: CreatePipe succeeded: both handles are open and ours.
    unsafe {
        Ok((
            OwnedHandle::from_raw_handle(read as _),
            OwnedHandle::from_raw_handle(write as _),
        ))
    }
}

/// A job whose processes all die when its last handle closes.
fn kill_on_close_job() -> io::Result<OwnedHandle> {
    // SAFETY: no security attributes, no name.
    let job = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
    if job.is_null() {
        return Err(os_error("CreateJobObjectW"));
    }
    // SAFETY: CreateJobObjectW succeeded: the handle is open and ours.
    let job = unsafe { OwnedHandle::from_raw_handle(job as _) };
    let mut limits = JOBOBJECT_EXTENDED_LIMIT_INFORMATION::default();
    limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    // SAFETY: `limits` is the structure this information class takes, and
    // its size is passed.
    let ok = unsafe {
        SetInformationJobObject(
            job.as_raw_handle() as HANDLE,
            JobObjectExtendedLimitInformation,
            std::ptr::from_ref(&limits).cast(),
            std::mem::size_of_val(&limits) as u32,
        )
    };
    if ok == 0 {
        return Err(os_error("SetInformationJobObject"));
    }
    Ok(job)
}

/// A process-thread attribute list naming the pseudo console.
struct ConsoleAttribute {
    /// usize-aligned storage for the opaque list.
    storage: Vec<usize>,
}

impl ConsoleAttribute {
    fn new(console: HPCON) -> io::Result<ConsoleAttribute> {
        let mut size = 0usize;
        // SAFETY: a null list asks for the size only (the call "fails"
        // with ERROR_INSUFFICIENT_BUFFER and sets `size`).
        unsafe { InitializeProcThreadAttributeList(std::ptr::null_mut(), 1, 0, &mut size) };
        if size == 0 {
            return Err(os_error("InitializeProcThreadAttributeList"));
        }
        let mut storage = vec![0usize; size.div_ceil(std::mem::size_of::<usize>())];
        let list: LPPROC_THREAD_ATTRIBUTE_LIST = storage.as_mut_ptr().cast();
        // SAFETY: `list` points to at least `size` writable, aligned bytes.
        if unsafe { InitializeProcThreadAttributeList(list, 1, 0, &mut size) } == 0 {
            return Err(os_error("InitializeProcThreadAttributeList"));
        }
        let attribute = ConsoleAttribute { storage };
        // SAFETY: the list is initialized with room for one attribute; the
        // pseudo console attribute's value is the HPCON itself (not a
        // pointer to it), and the console outlives the CreateProcessW call
        // that reads it.
        let ok = unsafe {
            UpdateProcThreadAttribute(
                attribute.list(),
                0,
                PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE as usize,
                console as *const c_void,
                std::mem::size_of::<HPCON>(),
                std::ptr::null_mut(),
                std::ptr::null(),
            )
        };
        if ok == 0 {
            return Err(os_error("UpdateProcThreadAttribute"));
        }
        Ok(attribute)
    }

    fn list(&self) -> LPPROC_THREAD_ATTRIBUTE_LIST {
        self.storage.as_ptr().cast_mut().cast()
    }
}

impl Drop for ConsoleAttribute {
    fn drop(&mut self) {
        // SAFETY: initialized in `new` (a failed `new` never builds one),
        // deleted once.
        unsafe { DeleteProcThreadAttributeList(self.list()) };
    }
}

fn thread(name: &str, body: impl FnOnce() + Send + 'static) -> io::Result<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(body)
        .map(drop)
        .map_err(|e| io::Error::new(e.kind(), format!("starting thread {name}: {e}")))
}

/// The output side: a reader thread moves the pipe's bytes into a bounded
/// queue, which `read` empties without blocking.
struct OutputQueue {
    queue: Receiver<Output>,
    unread: RefCell<Unread>,
}

impl OutputQueue {
    /// Starts the reader. It reads until the pipe closes; once the queue's
    /// receiver is gone it reads on and drops the bytes, since a console
    /// close that waits for the pipe to drain must not wait forever.
    fn start(mut pipe: File, wake: Wake) -> io::Result<OutputQueue> {
        let (tx, queue) = mpsc::sync_channel(QUEUE_CHUNKS);
        thread("ptyd-conpty-out", move || {
            let mut tx: Option<SyncSender<Output>> = Some(tx);
            let mut buf = vec![0u8; CHUNK];
            let end = loop {
                match pipe.read(&mut buf) {
                    // ERROR_BROKEN_PIPE is how an anonymous pipe ends.
                    Ok(0) => break None,
                    Err(e) if e.kind() == io::ErrorKind::BrokenPipe => break None,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => break Some(e),
                    Ok(n) => {
                        if let Some(q) = &tx {
                            if q.send(Output::Bytes(buf[..n].to_vec())).is_ok() {
                                wake();
                            } else {
                                tx = None;
                            }
                        }
                    }
                }
            };
            if let Some(q) = tx
                && q.send(Output::End(end)).is_ok()
            {
                wake();
            }
        })?;
        Ok(OutputQueue {
            queue,
            unread: RefCell::default(),
        })
    }

    fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let mut unread = self.unread.borrow_mut();
        if unread.at == unread.chunk.len() && !unread.ended {
            match self.queue.try_recv() {
                Ok(Output::Bytes(chunk)) => {
                    unread.chunk = chunk;
                    unread.at = 0;
                }
                Ok(Output::End(error)) => {
                    unread.ended = true;
                    if let Some(e) = error {
                        return Err(e);
                    }
                }
                Err(TryRecvError::Empty) => return Err(io::ErrorKind::WouldBlock.into()),
                Err(TryRecvError::Disconnected) => unread.ended = true,
            }
        }
        let Unread { chunk, at, .. } = &mut *unread;
        let n = buf.len().min(chunk.len() - *at);
        buf[..n].copy_from_slice(&chunk[*at..*at + n]);
        *at += n;
        Ok(n)
    }
}

/// The input side: `write` queues chunks without blocking, a writer thread
/// writes them into the pipe.
struct InputQueue {
    /// `None` once closed.
    queue: RefCell<Option<SyncSender<Vec<u8>>>>,
    /// A `write` found the queue full: the writer wakes the loop once it
    /// has made room.
    full: Arc<AtomicBool>,
}

impl InputQueue {
    /// Starts the writer. It writes until the queue closes or the pipe
    /// fails; then its receiver drops, so later writes are `BrokenPipe`.
    fn start(mut pipe: File, wake: Wake) -> io::Result<InputQueue> {
        let (queue, rx) = mpsc::sync_channel::<Vec<u8>>(QUEUE_CHUNKS);
        let full = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&full);
        thread("ptyd-conpty-in", move || {
            for chunk in rx.iter() {
                if pipe.write_all(&chunk).is_err() {
                    break;
                }
                if flag.swap(false, Ordering::SeqCst) {
                    wake();
                }
            }
            // A loop waiting for room learns of the broken pipe from one
            // more wake.
            drop(rx);
            if flag.swap(false, Ordering::SeqCst) {
                wake();
            }
        })?;
        Ok(InputQueue {
            queue: RefCell::new(Some(queue)),
            full,
        })
    }

    fn write(&self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let queue = self.queue.borrow();
        let Some(queue) = queue.as_ref() else {
            return Err(io::ErrorKind::BrokenPipe.into());
        };
        let n = buf.len().min(CHUNK);
        let mut chunk = buf[..n].to_vec();
        for attempt in 0..2 {
            match queue.try_send(chunk) {
                Ok(()) => return Ok(n),
                Err(TrySendError::Disconnected(_)) => {
                    return Err(io::ErrorKind::BrokenPipe.into());
                }
                Err(TrySendError::Full(back)) => {
                    chunk = back;
                    // Raised before the second try: if the writer made room
                    // in between, that try succeeds (and the wake it may
                    // still send is harmless); if not, the writer sees the
                    // flag after its next write and wakes the loop.
                    if attempt == 0 {
                        self.full.store(true, Ordering::SeqCst);
                    }
                }
            }
        }
        Err(io::ErrorKind::WouldBlock.into())
    }

    /// No more input: the writer finishes what is queued and ends.
    fn close(&self) {
        self.queue.borrow_mut().take();
    }
}

/// Wakes the loop when the process exits.
fn start_exit_watcher(process: Arc<OwnedHandle>, wake: Wake) -> io::Result<()> {
    thread("ptyd-conpty-exit", move || {
        // SAFETY: the handle stays open while this thread holds the Arc.
        unsafe { WaitForSingleObject(process.as_raw_handle() as HANDLE, INFINITE) };
        wake();
    })
}

/// The command line for `program` and `args`: each quoted by the MSVC
/// rules (what `CommandLineToArgvW` and the C runtime undo), except that
/// for cmd.exe everything after a `/c` or `/k` is passed as typed, since
/// cmd runs that text itself rather than splitting it.
pub fn command_line(program: &OsStr, args: &[OsString]) -> OsString {
    let mut line: Vec<u16> = Vec::new();
    // argv[0] is split by simpler rules (quotes only toggle): quote it
    // whole when it has a blank; a file name cannot contain a quote.
    let wide: Vec<u16> = program.encode_wide().collect();
    if wide.is_empty() || wide.iter().any(|&c| c == b' ' as u16 || c == b'\t' as u16) {
        line.push(b'"' as u16);
        line.extend(&wide);
        line.push(b'"' as u16);
    } else {
        line.extend(&wide);
    }
    let is_cmd = Path::new(program)
        .file_stem()
        .is_some_and(|s| s.eq_ignore_ascii_case("cmd"));
    let mut verbatim = false;
    for arg in args {
        line.push(b' ' as u16);
        if verbatim {
            line.extend(arg.encode_wide());
            continue;
        }
        quote_into(&mut line, arg);
        verbatim = is_cmd && (arg.eq_ignore_ascii_case("/c") || arg.eq_ignore_ascii_case("/k"));
    }
    OsString::from_wide(&line)
}

/// One argument by the MSVC rules: bare when it has no blank or quote;
/// otherwise in quotes, with each quote escaped and the backslashes before
/// a quote (or the closing quote) doubled.
fn quote_into(line: &mut Vec<u16>, arg: &OsStr) {
    let wide: Vec<u16> = arg.encode_wide().collect();
    let needs_quotes = wide.is_empty()
        || wide
            .iter()
            .any(|&c| c == b' ' as u16 || c == b'\t' as u16 || c == b'"' as u16);
    if !needs_quotes {
        line.extend(&wide);
        return;
    }
    line.push(b'"' as u16);
    let mut backslashes = 0;
    for &c in &wide {
        if c == b'\\' as u16 {
            backslashes += 1;
            continue;
        }
        let doubled = if c == b'"' as u16 {
            backslashes * 2 + 1
        } else {
            backslashes
        };
        line.extend(std::iter::repeat_n(b'\\' as u16, doubled));
        backslashes = 0;
        line.push(c);
    }
    line.extend(std::iter::repeat_n(b'\\' as u16, backslashes * 2));
    line.push(b'"' as u16);
}

/// `s` as UTF-16 with a NUL at the end; a NUL inside is refused.
fn wide_nul(s: &OsStr, what: &str) -> io::Result<Vec<u16>> {
    let mut wide: Vec<u16> = s.encode_wide().collect();
    if wide.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} contains a NUL character"),
        ));
    }
    wide.push(0);
    Ok(wide)
}

/// The environment as CreateProcessW takes it: `NAME=value` strings, each
/// NUL-terminated, sorted by name without regard to case (names are
/// case-insensitive on Windows: the last of two spellings wins), and a
/// final NUL.
fn environment_block(env: &[(OsString, OsString)]) -> io::Result<Vec<u16>> {
    let mut sorted: BTreeMap<String, (&OsStr, &OsStr)> = BTreeMap::new();
    for (k, v) in env {
        // A name may start with `=` (cmd's per-drive directories, `=C:`),
        // but contain none after that.
        let name: Vec<u16> = k.encode_wide().collect();
        if name.is_empty() || name[1..].contains(&(b'=' as u16)) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad environment variable name {k:?}"),
            ));
        }
        sorted.insert(k.to_string_lossy().to_uppercase(), (k, v));
    }
    let mut block = Vec::new();
    for (k, v) in sorted.values() {
        let mut kv = k.to_os_string();
        kv.push("=");
        kv.push(v);
        block.extend(wide_nul(&kv, "the environment")?);
    }
    if block.is_empty() {
        block.push(0);
    }
    block.push(0);
    Ok(block)
}

/// The file to start: `program` itself if it names a path (relative to
/// the pane's directory), else the first match in the *child's* `PATH`,
/// trying the name as given and then with each of `PATHEXT`'s extensions
/// (as cmd.exe would search; CreateProcessW would search the server's
/// `PATH`). `NotFound` if none.
fn resolve_program(spec: &SpawnSpec) -> io::Result<PathBuf> {
    let program = Path::new(&spec.program);
    if spec.program.is_empty() {
        return Err(io::Error::new(io::ErrorKind::NotFound, "no program given"));
    }
    let has_dir = spec
        .program
        .encode_wide()
        .any(|c| c == b'\\' as u16 || c == b'/' as u16 || c == b':' as u16);
    let lookup = |name: &str| {
        spec.env
            .iter()
            .rev()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let extensions: Vec<OsString> = lookup("PATHEXT")
        .unwrap_or_else(|| ".COM;.EXE;.BAT;.CMD".into())
        .to_string_lossy()
        .split(';')
        .filter(|e| e.starts_with('.'))
        .map(OsString::from)
        .collect();
    let candidates = |base: PathBuf| {
        let mut list = vec![base.clone()];
        if base.extension().is_none() {
            for ext in &extensions {
                let mut with = base.clone().into_os_string();
                with.push(ext);
                list.push(PathBuf::from(with));
            }
        }
        list
    };
    let dirs: Vec<PathBuf> = if has_dir {
        vec![spec.cwd.join(program.parent().unwrap_or(Path::new("")))]
    } else {
        std::env::split_paths(&lookup("PATH").unwrap_or_default())
            .filter(|d| !d.as_os_str().is_empty())
            .map(|d| if d.is_relative() { spec.cwd.join(d) } else { d })
            .collect()
    };
    let name = program.file_name().unwrap_or(program.as_os_str());
    for dir in dirs {
        for candidate in candidates(dir.join(name)) {
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "{:?} not found{}",
            spec.program,
            if has_dir { "" } else { " in the pane's PATH" }
        ),
    ))
}

#[cfg(test)]
mod tests {
    //! These run under Wine in CI (`wincargo test`). Wine 8 binds no
    //! standard handles to a ConPTY child, so there every command starts
    //! through `examples/conpty_shim.rs`, which opens the console itself;
    //! on Windows the commands run directly.

    use super::*;
    use crate::sys::running_under_wine;
    use std::time::{Duration, Instant};

    const TIMEOUT: Duration = Duration::from_secs(20);

    fn shim() -> PathBuf {
        // target/<triple>/debug/deps/ptyd-<hash>.exe -> target/<triple>/debug/examples/
        let exe = std::env::current_exe().unwrap();
        let shim = exe
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .join("examples")
            .join("conpty_shim.exe");
        assert!(
            shim.is_file(),
            "{} missing: a plain `cargo test` or `cargo build --example conpty_shim` builds it",
            shim.display()
        );
        shim
    }

    fn spec(argv: &[&str]) -> SpawnSpec {
        let mut argv: Vec<OsString> = argv.iter().map(OsString::from).collect();
        if running_under_wine() {
            argv.insert(0, shim().into_os_string());
        }
        SpawnSpec {
            program: argv.remove(0),
            args: argv,
            cwd: std::env::current_dir().unwrap(),
            env: std::env::vars_os()
                .filter(|(k, _)| super::super::inherits_env(k))
                .collect(),
            cols: 80,
            rows: 24,
        }
    }

    /// A loop as the server's: a mio poll woken by the pane's threads.
    struct Loop {
        poll: mio::Poll,
        events: mio::Events,
        waker: Arc<mio::Waker>,
    }

    impl Loop {
        fn new() -> Loop {
            let poll = mio::Poll::new().unwrap();
            let waker = Arc::new(mio::Waker::new(poll.registry(), mio::Token(1)).unwrap());
            Loop {
                poll,
                events: mio::Events::with_capacity(8),
                waker,
            }
        }

        fn wake(&self) -> Wake {
            let waker = Arc::clone(&self.waker);
            Arc::new(move || {
                let _ = waker.wake();
            })
        }

        fn spawn(&self, spec: &SpawnSpec) -> PtyMaster {
            spawn(spec, self.wake()).unwrap().0
        }

        /// Reads until `done(output, exited)` holds, sleeping in the poll
        /// between wakes. Returns the output; panics naming `what` after
        /// the timeout.
        fn until(
            &mut self,
            pty: &PtyMaster,
            what: &str,
            mut done: impl FnMut(&str, bool) -> bool,
        ) -> String {
            let deadline = Instant::now() + TIMEOUT;
            let mut out = Vec::new();
            let mut ended = false;
            loop {
                let mut buf = [0u8; 4096];
                loop {
                    match pty.read(&mut buf) {
                        Ok(0) => {
                            ended = true;
                            break;
                        }
                        Ok(n) => out.extend_from_slice(&buf[..n]),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => panic!("read: {e}"),
                    }
                }
                let text = String::from_utf8_lossy(&out).into_owned();
                if done(&text, ended || pty.exit_code().is_some()) {
                    return text;
                }
                let left = deadline.saturating_duration_since(Instant::now());
                assert!(
                    !left.is_zero(),
                    "timed out waiting for {what}; output: {text:?}"
                );
                self.poll.poll(&mut self.events, Some(left)).unwrap();
            }
        }
    }

    #[test]
    fn command_lines_quote_by_the_msvc_rules() {
        let line = |p: &str, a: &[&str]| {
            let args: Vec<OsString> = a.iter().map(OsString::from).collect();
            command_line(OsStr::new(p), &args).into_string().unwrap()
        };
        assert_eq!(line("prog", &["a", "b c", ""]), r#"prog a "b c" """#);
        assert_eq!(
            line(r"C:\Program Files\x.exe", &[]),
            r#""C:\Program Files\x.exe""#
        );
        assert_eq!(line("p", &[r#"say "hi""#]), r#"p "say \"hi\"""#);
        assert_eq!(line("p", &[r"a\b", r"dir\ x\"]), r#"p a\b "dir\ x\\""#);
        assert_eq!(line("p", &[r#"\"q"#]), r#"p "\\\"q""#);
        // cmd.exe gets its command as typed; other programs never do.
        assert_eq!(
            line("cmd.exe", &["/d", "/s", "/c", r#""echo "a b" & dir""#]),
            r#"cmd.exe /d /s /c "echo "a b" & dir""#
        );
        assert_eq!(line("CMD", &["/K", "echo x y"]), "CMD /K echo x y");
        assert_eq!(line("notcmd.exe", &["/c", "a b"]), r#"notcmd.exe /c "a b""#);
    }

    #[test]
    fn environment_blocks_are_sorted_without_case_and_end_twice() {
        let env = |pairs: &[(&str, &str)]| {
            let pairs: Vec<(OsString, OsString)> =
                pairs.iter().map(|(k, v)| (k.into(), v.into())).collect();
            environment_block(&pairs).map(|b| String::from_utf16(&b).unwrap())
        };
        assert_eq!(env(&[("b", "2"), ("A", "1")]).unwrap(), "A=1\0b=2\0\0");
        assert_eq!(env(&[("Path", "x"), ("PATH", "y")]).unwrap(), "PATH=y\0\0");
        assert_eq!(env(&[("=C:", r"C:\")]).unwrap(), "=C:=C:\\\0\0");
        assert_eq!(env(&[]).unwrap(), "\0\0");
        assert!(env(&[("A=B", "1")]).is_err());
        assert!(env(&[("A", "1\u{0}2")]).is_err());
    }

    #[test]
    fn a_program_not_in_the_panes_path_is_not_found_by_name() {
        let mut s = spec(&["cmd.exe"]);
        s.program = "no-such-program-ptyd".into();
        let e = spawn(&s, Arc::new(|| {})).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        assert!(e.to_string().contains("no-such-program-ptyd"), "{e}");
        // The child's PATH is searched, not the server's.
        let mut s = spec(&["cmd.exe"]);
        s.program = "cmd".into();
        s.env.retain(|(k, _)| !k.eq_ignore_ascii_case("PATH"));
        assert_eq!(
            spawn(&s, Arc::new(|| {})).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }

    #[test]
    fn output_reaches_the_loop_and_the_exit_code_follows() {
        let mut lp = Loop::new();
        let pty = lp.spawn(&spec(&["cmd.exe", "/c", "echo ptyd-out-marker& exit 7"]));
        lp.until(&pty, "the marker and the exit", |out, exited| {
            out.contains("ptyd-out-marker") && exited
        });
        assert_eq!(pty.exit_code(), Some(7));
        // Output ends once the console is closed, as a Unix master's
        // does when the slave side is gone.
        pty.hang_up();
        lp.until(&pty, "the end of output", |_, _| {
            let mut buf = [0u8; 64];
            matches!(pty.read(&mut buf), Ok(0))
        });
        assert!(matches!(pty.write(b"x"), Err(e) if e.kind() == io::ErrorKind::BrokenPipe));
    }

    #[test]
    fn shell_form_environment_and_directory_reach_the_program() {
        let dir = std::env::temp_dir().join(format!("ptyd-conpty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let comspec = "cmd.exe";
        let (program, args) =
            super::super::shell_command(OsStr::new(comspec), "echo [%PANE_MARK%]& cd");
        let mut argv: Vec<String> = vec![program.into_string().unwrap()];
        argv.extend(args.into_iter().map(|a| a.into_string().unwrap()));
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let mut s = spec(&argv);
        s.cwd = dir.clone();
        s.env.push(("PANE_MARK".into(), "value 42".into()));
        let mut lp = Loop::new();
        let pty = lp.spawn(&s);
        let leaf = dir.file_name().unwrap().to_string_lossy().into_owned();
        let out = lp.until(&pty, "the variable and the directory", |out, exited| {
            out.contains("[value 42]") && out.contains(&leaf) && exited
        });
        assert_eq!(pty.exit_code(), Some(0), "{out:?}");
        drop(pty);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn typed_input_runs_in_an_interactive_cmd() {
        let mut lp = Loop::new();
        let pty = lp.spawn(&spec(&["cmd.exe"]));
        // Enter is CR, as a terminal sends it.
        let typed = b"set /a 6000+7\r";
        assert_eq!(pty.write(typed).unwrap(), typed.len());
        lp.until(&pty, "the sum", |out, _| out.contains("6007"));
        pty.write(b"exit 3\r").unwrap();
        lp.until(&pty, "the exit", |_, exited| exited);
        assert_eq!(pty.exit_code(), Some(3));
    }

    #[test]
    fn killing_ends_the_whole_tree() {
        let mut lp = Loop::new();
        // cmd starts a second cmd, which waits for a key that never comes.
        let pty = lp.spawn(&spec(&["cmd.exe", "/c", "cmd.exe /c pause"]));
        let deadline = Instant::now() + TIMEOUT;
        let pids = loop {
            let pids = pty.processes().unwrap();
            // The shim under Wine adds one more.
            if pids.len() >= 2 + running_under_wine() as usize {
                break pids;
            }
            assert!(
                Instant::now() < deadline,
                "the child never started: {pids:?}"
            );
            // Nothing reports a grandchild's start; this is a poll.
            std::thread::sleep(Duration::from_millis(20));
        };
        pty.kill().unwrap();
        lp.until(&pty, "the exit", |_, exited| exited);
        assert_eq!(pty.exit_code(), Some(KILLED_EXIT_CODE));
        let deadline = Instant::now() + TIMEOUT;
        while !pty.processes().unwrap().is_empty() {
            assert!(
                Instant::now() < deadline,
                "left in the job: {:?} of {pids:?}",
                pty.processes()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn dropping_the_pane_ends_its_processes() {
        let lp = Loop::new();
        let (pty, child) = spawn(&spec(&["cmd.exe", "/c", "pause"]), lp.wake()).unwrap();
        let process = Arc::clone(&pty.process);
        drop(pty);
        // SAFETY: `process` is open (we hold the Arc).
        let waited = unsafe {
            WaitForSingleObject(
                process.as_raw_handle() as HANDLE,
                TIMEOUT.as_millis() as u32,
            )
        };
        assert_eq!(waited, WAIT_OBJECT_0, "pid {} still runs", child.pid);
    }

    #[test]
    fn resize_works_or_says_it_cannot() {
        let lp = Loop::new();
        let pty = lp.spawn(&spec(&["cmd.exe", "/c", "pause"]));
        match pty.resize(100, 30) {
            Ok(()) => assert!(!running_under_wine()),
            // Wine 8 has no ResizePseudoConsole.
            Err(e) => {
                assert!(running_under_wine(), "{e}");
                assert_eq!(e.kind(), io::ErrorKind::Unsupported, "{e}");
            }
        }
        pty.hang_up();
        assert_eq!(
            pty.resize(80, 24).unwrap_err().kind(),
            io::ErrorKind::NotConnected
        );
    }

    #[test]
    fn input_beyond_the_queue_is_refused_then_taken_after_a_wake() {
        // A pipe nobody reads yet stands for a console that takes no input.
        let (read_end, write_end) = pipe().unwrap();
        let mut lp = Loop::new();
        let input = InputQueue::start(File::from(write_end), lp.wake()).unwrap();
        let chunk = vec![b'x'; CHUNK];
        let mut queued = 0usize;
        let full = loop {
            match input.write(&chunk) {
                Ok(n) => queued += n,
                Err(e) => break e,
            }
            // The queue, the chunk in the writer's hands and the pipe's
            // buffer, no more.
            assert!(
                queued <= (QUEUE_CHUNKS + 2) * CHUNK + (1 << 20),
                "unbounded: {queued}"
            );
        };
        assert_eq!(full.kind(), io::ErrorKind::WouldBlock);
        assert!(queued >= QUEUE_CHUNKS * CHUNK);
        // Reading makes room; the writer wakes the loop, and the next write
        // is taken.
        let mut reader = File::from(read_end);
        let drain = std::thread::spawn(move || {
            let mut buf = vec![0u8; CHUNK];
            let mut total = 0usize;
            while let Ok(n @ 1..) = reader.read(&mut buf) {
                total += n;
            }
            total
        });
        let deadline = Instant::now() + TIMEOUT;
        loop {
            lp.poll.poll(&mut lp.events, Some(TIMEOUT)).unwrap();
            match input.write(&chunk) {
                Ok(n) => {
                    queued += n;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    assert!(Instant::now() < deadline, "no room after the wake")
                }
                Err(e) => panic!("{e}"),
            }
        }
        // Closing lets the writer finish the queue and close the pipe: every
        // byte taken arrives, in order of the queue.
        input.close();
        drop(input);
        assert_eq!(drain.join().unwrap(), queued);
    }

    #[test]
    fn one_loop_learns_which_of_its_panes_woke() {
        let mut poll = mio::Poll::new().unwrap();
        let mut events = mio::Events::with_capacity(8);
        let waker = Arc::new(mio::Waker::new(poll.registry(), mio::Token(7)).unwrap());
        let wakes = crate::pty::PaneWakes::new(waker);
        let mut panes: BTreeMap<u64, (PtyMaster, String)> = BTreeMap::new();
        for id in [3u64, 5] {
            let pty = spawn(
                &spec(&[
                    "cmd.exe",
                    "/c",
                    &format!("echo pane-{id}-marker& exit {id}"),
                ]),
                wakes.wake_for(id),
            )
            .unwrap()
            .0;
            panes.insert(id, (pty, String::new()));
        }
        // A wake for a pane the loop does not know (removed meanwhile) is
        // reported and skipped.
        wakes.wake_for(99)();
        let mut seen = std::collections::BTreeSet::new();
        let deadline = Instant::now() + TIMEOUT;
        while !panes
            .values()
            .all(|(pty, out)| pty.exit_code().is_some() && out.contains("-marker"))
        {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "outputs so far: {:?}",
                panes.values().map(|p| &p.1).collect::<Vec<_>>()
            );
            poll.poll(&mut events, Some(left)).unwrap();
            if !events.iter().any(|e| e.token() == mio::Token(7)) {
                continue;
            }
            for id in wakes.take_ready() {
                seen.insert(id);
                let Some((pty, out)) = panes.get_mut(&id) else {
                    continue;
                };
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = pty.read(&mut buf) {
                    out.push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }
        }
        for (id, (pty, out)) in &panes {
            assert!(
                out.contains(&format!("pane-{id}-marker")),
                "pane {id}: {out:?}"
            );
            assert!(
                !out.contains(&format!("pane-{}-marker", 8 - id)),
                "pane {id}: {out:?}"
            );
            assert_eq!(pty.exit_code(), Some(*id as u32));
        }
        assert!(seen.is_superset(&[3, 5, 99].into()), "{seen:?}");
    }

    #[test]
    fn output_is_read_in_any_slices_and_then_ends() {
        let (read_end, write_end) = pipe().unwrap();
        let mut lp = Loop::new();
        let output = OutputQueue::start(File::from(read_end), lp.wake()).unwrap();
        let mut buf = [0u8; 3];
        assert_eq!(
            output.read(&mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        let mut writer = File::from(write_end);
        writer.write_all(b"hello world").unwrap();
        drop(writer);
        let mut got = Vec::new();
        let deadline = Instant::now() + TIMEOUT;
        loop {
            match output.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    assert!(Instant::now() < deadline, "no end; got {got:?}");
                    lp.poll.poll(&mut lp.events, Some(TIMEOUT)).unwrap();
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(got, b"hello world");
        assert_eq!(output.read(&mut buf).unwrap(), 0);
    }
}
