fn main() -> std::process::ExitCode {
    git_xet::cli::main()
}
