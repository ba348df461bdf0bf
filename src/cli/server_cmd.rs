//! `git xet server`: run the server, or manage its tokens.

use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct ServerArgs {}

pub fn run(_args: ServerArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`git xet server` is not implemented yet")
}
