//! `git xet upload` and `git xet download`: the client engine from the command line.

use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct UploadArgs {}

#[derive(clap::Args, Debug)]
pub struct DownloadArgs {}

pub fn upload(_args: UploadArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`git xet upload` is not implemented yet")
}

pub fn download(_args: DownloadArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`git xet download` is not implemented yet")
}
