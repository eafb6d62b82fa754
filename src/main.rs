//! `ptyd`: parse the command line, dispatch, exit with the command's code.

#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

#[cfg(unix)]
fn main() {
    std::process::exit(ptyd::cli::main());
}

/// The daemon and its commands are not built on Windows yet (issue 15,
/// ARCHITECTURE.md "Windows": the ConPTY backend and the named-pipe
/// transport exist, the server loop does not use them yet); until then
/// the Windows build says so rather than pretending.
#[cfg(windows)]
fn main() {
    let version = std::env::args()
        .nth(1)
        .is_some_and(|a| a == "version" || a == "--version");
    if version {
        println!("ptyd {}", env!("CARGO_PKG_VERSION"));
        return;
    }
    eprintln!(
        "ptyd: the server and its commands do not run on Windows yet; \
         this build carries the terminal model, the ConPTY backend and the \
         named-pipe transport only"
    );
    std::process::exit(2);
}
