//! `git-xet-server`: the program `git xet server`, `git xet shell` and `git xet pre-receive`
//! run (the `git-xet` binary execs it), kept apart so that the agent and the filter do not
//! carry the server.

fn main() -> std::process::ExitCode {
    git_xet_server::cli::main()
}
