//! git integration commands: transfer, install, uninstall, migrate, status, quickstart.

use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct TransferArgs {}

#[derive(clap::Args, Debug)]
pub struct InstallArgs {}

#[derive(clap::Args, Debug)]
pub struct MigrateArgs {}

#[derive(clap::Args, Debug)]
pub struct StatusArgs {}

#[derive(clap::Args, Debug)]
pub struct QuickstartArgs {}

fn todo(what: &str) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`git xet {what}` is not implemented yet")
}

pub fn transfer(_args: TransferArgs) -> anyhow::Result<ExitCode> {
    todo("transfer")
}
pub fn install(_args: InstallArgs) -> anyhow::Result<ExitCode> {
    todo("install")
}
pub fn uninstall(_args: InstallArgs) -> anyhow::Result<ExitCode> {
    todo("uninstall")
}
pub fn migrate(_args: MigrateArgs) -> anyhow::Result<ExitCode> {
    todo("migrate")
}
pub fn status(_args: StatusArgs) -> anyhow::Result<ExitCode> {
    todo("status")
}
pub fn quickstart(_args: QuickstartArgs) -> anyhow::Result<ExitCode> {
    todo("quickstart")
}
