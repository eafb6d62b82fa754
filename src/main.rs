//! `ptyd`: parse the command line, dispatch, exit with the command's code.
//! Under the name `tmux`, or as `ptyd tmux ...`, the tmux front reads it.

#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

fn main() {
    // Run as `tmux` (a symlink) or `ptyd tmux ...`: the tmux front.
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if ptyd::tmux::invoked_as_tmux() {
        std::process::exit(ptyd::tmux::main(args[1..].to_vec()));
    }
    if args.get(1).is_some_and(|a| a == "tmux") {
        std::process::exit(ptyd::tmux::main(args[2..].to_vec()));
    }
    std::process::exit(ptyd::cli::main());
}
