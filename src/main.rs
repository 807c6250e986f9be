//! The `perfgate` binary: everything lives in the library; this maps the outcome to an exit code.

fn main() {
    std::process::exit(perfgate::cli::main());
}
