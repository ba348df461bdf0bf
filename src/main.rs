//! `git-xet`: the program git and git-lfs start (the transfer agent, the filter) and the
//! commands users type. The server side lives in `git-xet-server` (see cli::forward).

mod cli;
mod common;

fn main() -> std::process::ExitCode {
    cli::main()
}
