//! `ptyd`: parse the command line, dispatch, exit with the command's code.

#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

fn main() {
    std::process::exit(ptyd::cli::main());
}
