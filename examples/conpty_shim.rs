//! Test helper for the ConPTY backend (`src/pty/windows.rs`), used only by
//! its tests and only under Wine: Wine 8 starts a child attached to a
//! pseudo console without standard handles bound to it, so the child's
//! output would go to the server's stdout instead. This shim opens the
//! console itself (`CONIN$`, `CONOUT$`), makes those its standard handles,
//! and runs the real command (its arguments) with them, exiting with its
//! code. Windows binds the handles itself and needs no shim.
//!
//! The command's arguments are passed on by `ptyd::pty::command_line`'s
//! rules (cmd.exe's command after `/c` as typed), as the backend would.

#[cfg(windows)]
fn main() {
    use std::os::windows::io::AsRawHandle;
    use std::os::windows::process::CommandExt;
    use windows_sys::Win32::System::Console::{
        STD_ERROR_HANDLE, STD_INPUT_HANDLE, STD_OUTPUT_HANDLE, SetStdHandle,
    };

    let mut args = std::env::args_os().skip(1);
    let Some(program) = args.next() else {
        eprintln!("usage: conpty_shim PROGRAM [ARGS...]");
        std::process::exit(2);
    };
    let args: Vec<_> = args.collect();
    let open = |name: &str| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(name)
            .unwrap_or_else(|e| {
                eprintln!("conpty_shim: opening {name}: {e}");
                std::process::exit(2)
            })
    };
    let conin = open("CONIN$");
    let conout = open("CONOUT$");
    for (which, file) in [
        (STD_INPUT_HANDLE, &conin),
        (STD_OUTPUT_HANDLE, &conout),
        (STD_ERROR_HANDLE, &conout),
    ] {
        // SAFETY: the handle is open and stays open (the files live until
        // the process exits).
        unsafe { SetStdHandle(which, file.as_raw_handle() as _) };
    }
    // The arguments after the program, quoted as the backend quotes them.
    let line = ptyd::pty::command_line(&program, &args);
    let line = line.to_string_lossy();
    let rest = line
        .strip_prefix(&*program.to_string_lossy())
        .or_else(|| line.strip_prefix(&*format!("\"{}\"", program.to_string_lossy())))
        .unwrap_or("")
        .trim_start();
    let mut command = std::process::Command::new(&program);
    if !rest.is_empty() {
        command.raw_arg(rest);
    }
    match command.status() {
        Ok(status) => std::process::exit(status.code().unwrap_or(1)),
        Err(e) => {
            eprintln!("conpty_shim: starting {program:?}: {e}");
            std::process::exit(127)
        }
    }
}

#[cfg(not(windows))]
fn main() {
    eprintln!("conpty_shim is a Windows test helper");
    std::process::exit(2);
}
