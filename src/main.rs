//! `ptyd`: parse the command line, dispatch, exit with the command's code.

#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

#[cfg(unix)]
fn main() {
    std::process::exit(ptyd::cli::main());
}

/// The daemon and its commands need a Windows transport first (issue 15,
/// ARCHITECTURE.md "Windows"); until then the Windows build says so rather
/// than pretending.
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
         this build carries the terminal model and the ConPTY backend only"
    );
    std::process::exit(2);
}
