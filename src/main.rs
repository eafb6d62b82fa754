//! `ptyd`: parse the command line, dispatch, exit with the command's code.

fn main() {
    std::process::exit(ptyd::cli::main());
}
