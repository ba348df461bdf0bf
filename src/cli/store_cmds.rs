//! `git xet materialize`: whole LFS objects back into `.git/lfs/objects` (docs/store.md).

use std::io::Write;
use std::process::ExitCode;

use crate::common::logging;
use git_xet_git::repo::Repo;
use git_xet_io::human::human_bytes;

#[derive(clap::Args, Debug)]
pub struct MaterializeArgs {
    /// Every object reachable from any ref (what `git lfs push --all` and `git lfs fetch
    /// --all` read), not only the revisions named.
    #[arg(long)]
    all: bool,
    /// The revisions whose objects to materialize (default: HEAD).
    #[arg(value_name = "REV", conflicts_with = "all")]
    revs: Vec<String>,
}

pub fn materialize(args: MaterializeArgs) -> anyhow::Result<ExitCode> {
    logging::init("warn");
    let repo = Repo::current_with_config()?;
    let revs: Vec<&str> = if args.all {
        vec!["--all"]
    } else if args.revs.is_empty() {
        vec!["HEAD"]
    } else {
        args.revs.iter().map(String::as_str).collect()
    };
    let report = git_xet_git::store::materialize(&repo, &revs)?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{} objects whole in .git/lfs/objects: {} rebuilt from the chunk store, {} downloaded, {} already there",
        report.present + report.rebuilt + report.downloaded,
        report.rebuilt,
        report.downloaded,
        report.present
    )?;
    out.flush()?;
    if report.failed.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    for path in &report.failed {
        eprintln!("git-xet: could not materialize {path}");
    }
    eprintln!("git-xet: try `git lfs fetch` for these (git-lfs downloads them its own way)");
    Ok(ExitCode::FAILURE)
}

#[derive(clap::Args, Debug)]
pub struct PruneArgs {
    /// Only say what would be deleted.
    #[arg(long)]
    dry_run: bool,
}

pub fn prune(args: PruneArgs) -> anyhow::Result<ExitCode> {
    logging::init("warn");
    let repo = Repo::current_with_config().ok();
    let outcome = git_xet_git::store::prune(repo.as_ref(), args.dry_run)?;
    let r = &outcome.report;
    let verb = if args.dry_run {
        "would delete"
    } else {
        "deleted"
    };
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "chunk store {}: kept {} ranges ({}) that {} registered clones reference; {verb} {} ranges ({}) and {} file records",
        outcome.store.display(),
        r.kept_entries,
        human_bytes(r.kept_bytes),
        outcome.clones,
        r.deleted_entries,
        human_bytes(r.deleted_bytes),
        r.deleted_records,
    )?;
    for gone in &outcome.forgotten {
        writeln!(out, "forgot {} (no longer exists)", gone.display())?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
