//! git integration commands: transfer, install, uninstall, migrate, status, quickstart,
//! pre-receive.
//! Argument parsing and output only; the work is in `git_xet_git` and `git_xet_lfs`, which
//! return what this prints.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;

use crate::common::logging;
use git_xet_git::config::Scope;
use git_xet_git::install::{self, InstallOptions};
use git_xet_git::status::{FilterSetting, Location, ObjectsSetting, StatusReport};
use git_xet_git::store::KeepCheckedOut;
use git_xet_io::human::human_bytes;

use super::progress;

#[derive(clap::Args, Debug)]
pub struct TransferArgs {}

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("scope").args(["global", "local", "system"])))]
pub struct InstallArgs {
    /// In the user's git config (~/.gitconfig); the default.
    #[arg(long)]
    global: bool,
    /// In the current repository's .git/config only.
    #[arg(long)]
    local: bool,
    /// In the machine's git config (/etc/gitconfig).
    #[arg(long)]
    system: bool,
    /// Parallel transfers: 1 runs a single agent process; more sets lfs.concurrenttransfers.
    #[arg(long, value_name = "N")]
    concurrency: Option<u32>,
    /// Keep git-lfs's own clean/smudge filter instead of `git xet filter-process`.
    #[arg(long)]
    no_filter: bool,
    /// Leave the man pages alone. Otherwise install (in the global config, the default) puts
    /// them where man looks (PATH's BIN/../share/man next to git-xet, or ~/.local/share/man)
    /// and uninstall removes the ones it installed.
    #[arg(long)]
    no_man: bool,
}

impl InstallArgs {
    fn scope(&self) -> Scope {
        if self.local {
            Scope::Local
        } else if self.system {
            Scope::System
        } else {
            Scope::Global
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct MigrateArgs {
    /// The remote whose LFS server receives the objects (default: the current branch's
    /// remote, else origin).
    remote: Option<String>,
    /// Do not download every object back through XET afterwards.
    #[arg(long)]
    skip_verify: bool,
    /// The XET server's LFS endpoint to move the objects to (default: REMOTE's own,
    /// `remote.<name>.lfsurl` or derived from its URL; never `lfs.url`, which names where
    /// they are now).
    #[arg(long, value_name = "URL")]
    to: Option<String>,
    /// Afterwards, commit a `.lfsconfig` whose `lfs.url` names the new endpoint (or none,
    /// when REMOTE's URL derives it) on the current branch. History is not rewritten.
    #[arg(long)]
    update_lfsconfig: bool,
    /// Objects uploaded at once (each holds at most one 64 MiB xorb in memory).
    #[arg(long, value_name = "N", default_value_t = git_xet_git::migrate::DEFAULT_JOBS)]
    jobs: usize,
}

#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// The remote to check (default: the current branch's remote, else origin).
    #[arg(long)]
    remote: Option<String>,
    /// Do not contact the LFS server.
    #[arg(long)]
    offline: bool,
}

#[derive(clap::Args, Debug)]
pub struct QuickstartArgs {
    /// Size of the demo file in MiB.
    #[arg(long, default_value_t = 256, value_name = "MIB")]
    size_mib: u64,
    /// Work in this directory (kept afterwards) instead of a temporary one.
    #[arg(long, value_name = "DIR")]
    dir: Option<std::path::PathBuf>,
}

/// The program git-lfs should run: this very binary.
fn agent_program() -> anyhow::Result<String> {
    let exe = std::env::current_exe().context("cannot find the path of the git-xet binary")?;
    let exe = exe.canonicalize().unwrap_or(exe);
    exe.into_os_string()
        .into_string()
        .map_err(|p| anyhow::anyhow!("the path of the git-xet binary {p:?} is not UTF-8"))
}

pub fn transfer(_args: TransferArgs) -> anyhow::Result<ExitCode> {
    logging::init("warn");
    git_xet_git::transfer::run_stdio()
}

pub fn filter_process() -> anyhow::Result<ExitCode> {
    logging::init("warn");
    git_xet_git::filter::run_stdio(Box::new(progress::FilterDownloads))
}

pub fn install(args: InstallArgs) -> anyhow::Result<ExitCode> {
    logging::init("warn");
    let scope = args.scope();
    let cwd = std::env::current_dir()?;
    let config = install::config_for(scope, &cwd)?;
    let opts = InstallOptions {
        scope,
        concurrency: args.concurrency,
        program: agent_program()?,
        filter: !args.no_filter,
    };
    let changes = install::install(&config, &opts)?;
    for c in &changes {
        println!("  {c}");
    }
    // Man pages are the user's, like the global config; not for one repository or the machine.
    if scope == Scope::Global && !args.no_man {
        let exe = std::env::current_exe().context("cannot find the path of the git-xet binary")?;
        println!("  {}", super::man_install::install(&config, &exe)?);
    }
    println!(
        "git-xet is installed ({} config): git-lfs uses it when the LFS server offers `xet`",
        scope.name()
    );
    Ok(ExitCode::SUCCESS)
}

pub fn uninstall(args: InstallArgs) -> anyhow::Result<ExitCode> {
    logging::init("warn");
    let scope = args.scope();
    let cwd = std::env::current_dir()?;
    let config = install::config_for(scope, &cwd)?;
    // The pages' record goes first: uninstall removes the `xet.install` section once empty.
    let pages = match scope == Scope::Global && !args.no_man {
        true => super::man_install::uninstall(&config)?,
        false => 0,
    };
    let changes = install::uninstall(&config, scope, &agent_program()?)?;
    if changes.is_empty() && pages == 0 {
        println!("nothing to uninstall in the {} config", scope.name());
    }
    for c in &changes {
        println!("  {c}");
    }
    if pages > 0 {
        println!("  removed {pages} man pages");
    }
    Ok(ExitCode::SUCCESS)
}

pub fn migrate(args: MigrateArgs) -> anyhow::Result<ExitCode> {
    logging::init("info");
    let opts = git_xet_git::migrate::Options {
        remote: args.remote,
        to: args.to,
        verify: !args.skip_verify,
        update_lfsconfig: args.update_lfsconfig,
        jobs: args.jobs,
    };
    let report = git_xet_git::migrate::run(&opts, &progress::MigrateDisplay::default())?;
    let mut out = std::io::stdout().lock();
    for line in report.lines() {
        writeln!(out, "{line}")?;
    }
    writeln!(out, "next:")?;
    for step in &report.next_steps {
        writeln!(out, "  - {step}")?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

pub fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    logging::init("warn");
    let report = git_xet_git::status::run(args.remote.as_deref(), args.offline)?;
    let mut out = std::io::stdout().lock();
    for line in status_lines(&report) {
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// `git xet status`'s output, one line each.
fn status_lines(r: &StatusReport) -> Vec<String> {
    let mut lines = Vec::new();
    lines.push(match &r.agent {
        Some(a) => format!(
            "agent:          configured ({} config): {} {}{}",
            a.scope,
            a.path,
            a.args,
            if a.usable {
                ""
            } else {
                "  [program not found: run `git xet install` again]"
            }
        ),
        None => "agent:          not configured (run `git xet install`)".into(),
    });
    lines.push(format!(
        "filter:         {}",
        match r.filter {
            FilterSetting::Ours => "git-xet filter-process",
            FilterSetting::GitLfs =>
                "git-lfs filter-process (`git xet install` makes checkouts faster)",
            FilterSetting::Missing => "missing (run `git xet install` or `git lfs install`)",
        }
    ));
    if r.remotes.is_empty() {
        lines.push("remote:         none".into());
    }
    for remote in &r.remotes {
        lines.push(format!("remote:         {}", remote.name));
        let endpoint = match &remote.endpoint {
            Ok(e) => e,
            Err(e) => {
                lines.push(format!("  (cannot read its configuration: {e})"));
                continue;
            }
        };
        lines.push(format!("LFS endpoint:   {}", endpoint.shown));
        lines.push(format!("authentication: {}", endpoint.authentication));
        if let Some(t) = &endpoint.transfers {
            lines.push(format!("transfers:      {}", t.path));
            lines.push(format!("offers xet:     {}", t.offers_xet));
        }
    }
    lines.push(format!(
        "shard cache:    {} in {}",
        human_bytes(r.shard_cache_bytes),
        r.xet_dir.display()
    ));
    lines.extend(objects_lines(&r.objects));
    lines.push(format!("LFS files in HEAD: {}", r.files.len()));
    for f in &r.files {
        lines.push(format!(
            "  {:64}  {:>10}  {}  ({})",
            f.xet_hash.as_deref().unwrap_or("?"),
            human_bytes(f.size),
            f.path,
            location_text(&f.location)
        ));
    }
    lines
}

/// Where old versions live and which whole objects stay, and what that means for git-lfs.
fn objects_lines(objects: &ObjectsSetting) -> Vec<String> {
    match objects {
        ObjectsSetting::AllWhole => vec![
            "chunk store:    not used (xet.store = off, or xet.keepObjects): every version stays whole in .git/lfs/objects".into(),
        ],
        ObjectsSetting::Store { path, keep } => {
            let mut lines = vec![format!(
                "chunk store:    {} (every version pulled or pushed, rebuilt offline)",
                path.display()
            )];
            match keep {
                KeepCheckedOut::Keep => lines.extend([
                    "whole objects:  the checked-out version's, as git-lfs keeps them (xet.keepCheckedOut=auto)".into(),
                    "                older versions: `git xet materialize REV` before `git lfs fsck REV` or `git lfs push --all`".into(),
                ]),
                KeepCheckedOut::Never => lines.push(format!(
                    "whole objects:  none (xet.keepCheckedOut=false): `git xet materialize` first for {}",
                    KeepCheckedOut::NEEDS_MATERIALIZE
                )),
            }
            lines
        }
    }
}

/// Where a file's content is, in words.
fn location_text(at: &Location) -> String {
    if at.only_on_server() {
        return "only on the server: `git lfs pull` or `git xet materialize`".into();
    }
    let places = [
        (at.work_tree, "working tree"),
        (at.whole, "whole object"),
        (at.store, "chunk store"),
    ];
    places
        .iter()
        .filter(|(here, _)| *here)
        .map(|(_, name)| *name)
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn quickstart(args: QuickstartArgs) -> anyhow::Result<ExitCode> {
    logging::init("warn");
    let opts = git_xet_git::quickstart::Options {
        size_mib: args.size_mib,
        dir: args.dir,
        program: agent_program()?,
    };
    let report = git_xet_git::quickstart::run(&opts, &progress::quickstart_step)?;
    println!("{}", report.table);
    println!("quickstart finished in {:.1}s", report.seconds);
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_xet_git::status::{AgentSetting, EndpointStatus, FileStatus, RemoteStatus, Transfers};

    #[test]
    fn status_prints_every_part_of_the_report() {
        let report = StatusReport {
            agent: Some(AgentSetting {
                scope: "global".into(),
                path: "/gone/git-xet".into(),
                args: "transfer".into(),
                usable: false,
            }),
            filter: FilterSetting::GitLfs,
            remotes: vec![
                RemoteStatus {
                    name: "origin".into(),
                    endpoint: Ok(EndpointStatus {
                        shown: "https://h/r.git/info/lfs".into(),
                        authentication: "http credentials".into(),
                        transfers: Some(Transfers {
                            path: "xet".into(),
                            offers_xet: "yes".into(),
                        }),
                    }),
                },
                RemoteStatus {
                    name: "broken".into(),
                    endpoint: Err(git_xet_git::GitError::io(
                        "reading",
                        std::io::Error::other("bad"),
                    )),
                },
            ],
            xet_dir: "/r/.git/xet".into(),
            shard_cache_bytes: 2048,
            objects: ObjectsSetting::Store {
                path: "/home/u/store".into(),
                keep: KeepCheckedOut::Never,
            },
            files: vec![
                FileStatus {
                    xet_hash: Some("ab".repeat(32)),
                    size: 1 << 20,
                    path: "a.bin".into(),
                    location: Location {
                        work_tree: true,
                        whole: false,
                        store: true,
                    },
                },
                FileStatus {
                    xet_hash: None,
                    size: 5,
                    path: "b.bin".into(),
                    location: Location::default(),
                },
            ],
        };
        let lines = status_lines(&report);
        let broken = format!(
            "  (cannot read its configuration: {})",
            report.remotes[1].endpoint.as_ref().unwrap_err()
        );
        let expected = [
            "agent:          configured (global config): /gone/git-xet transfer  [program not found: run `git xet install` again]".to_string(),
            "filter:         git-lfs filter-process (`git xet install` makes checkouts faster)".into(),
            "remote:         origin".into(),
            "LFS endpoint:   https://h/r.git/info/lfs".into(),
            "authentication: http credentials".into(),
            "transfers:      xet".into(),
            "offers xet:     yes".into(),
            "remote:         broken".into(),
            broken,
            format!("shard cache:    {} in /r/.git/xet", human_bytes(2048)),
            "chunk store:    /home/u/store (every version pulled or pushed, rebuilt offline)".into(),
            "whole objects:  none (xet.keepCheckedOut=false): `git xet materialize` first for `git lfs fsck` and `git lfs checkout`".into(),
            "LFS files in HEAD: 2".into(),
            format!(
                "  {}  {:>10}  a.bin  (working tree, chunk store)",
                "ab".repeat(32),
                human_bytes(1 << 20)
            ),
            format!(
                "  {:64}  {:>10}  b.bin  (only on the server: `git lfs pull` or `git xet materialize`)",
                "?",
                human_bytes(5)
            ),
        ];
        assert_eq!(lines, expected);

        let bare = StatusReport {
            agent: None,
            filter: FilterSetting::Missing,
            remotes: vec![],
            objects: ObjectsSetting::AllWhole,
            files: vec![],
            ..report
        };
        let lines = status_lines(&bare);
        assert_eq!(
            lines[..3],
            [
                "agent:          not configured (run `git xet install`)",
                "filter:         missing (run `git xet install` or `git lfs install`)",
                "remote:         none",
            ]
        );
        assert!(
            lines[4].starts_with("chunk store:    not used"),
            "{lines:?}"
        );
        assert_eq!(lines[5], "LFS files in HEAD: 0");
    }
}
