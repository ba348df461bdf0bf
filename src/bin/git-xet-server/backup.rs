//! `git xet server backup [verify]` and `git xet server restore`: see `git_xet_upkeep::backup`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::deployment::DeploymentArgs;
use super::upkeep::{open_existing, runtime};
use git_xet_deployment::IndexLocation;
use git_xet_index::PgIndex;
use git_xet_io::human::human_bytes;
use git_xet_upkeep::backup::{self, BackupOptions, Dest, RestoreOptions};

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(super) struct BackupArgs {
    #[command(subcommand)]
    command: Option<BackupCommand>,
    #[command(flatten)]
    deployment: DeploymentArgs,
    /// Where to back up: a directory or `s3://BUCKET[/PREFIX]` (S3 configured by the same
    /// AWS_* variables as --object-store).
    #[arg(long, value_name = "DEST", required = true)]
    to: Option<String>,
    /// Leave the signing secret out (the manifest says so; a restore then needs
    /// --secret-file, or issues new tokens).
    #[arg(long)]
    exclude_secret: bool,
    /// Where hosted git repositories live [default: DATA/repos].
    #[arg(long, env = "GIT_XET_SERVER_GIT_DIR", value_name = "DIR")]
    git_dir: Option<PathBuf>,
}

#[derive(clap::Subcommand, Debug)]
enum BackupCommand {
    /// Check a snapshot: every file against the manifest's sha256, every object it needs
    /// present with its size (--read-data: and its sha256). Exits non-zero naming what is
    /// missing or damaged.
    Verify(VerifyArgs),
}

#[derive(clap::Args, Debug)]
pub(super) struct VerifyArgs {
    /// The backup: a directory or `s3://BUCKET[/PREFIX]`.
    #[arg(long, value_name = "DEST")]
    from: String,
    /// The snapshot to check [default: the latest complete one].
    #[arg(long)]
    snapshot: Option<String>,
    /// Read every object and check its sha256 too.
    #[arg(long)]
    read_data: bool,
}

#[derive(clap::Args, Debug)]
pub(super) struct RestoreArgs {
    #[command(flatten)]
    deployment: DeploymentArgs,
    /// The backup: a directory or `s3://BUCKET[/PREFIX]`.
    #[arg(long, value_name = "DEST")]
    from: String,
    /// The snapshot to restore [default: the latest complete one].
    #[arg(long)]
    snapshot: Option<String>,
    /// The deployment's 32-byte secret, for a snapshot taken with --exclude-secret.
    #[arg(long, value_name = "FILE")]
    secret_file: Option<PathBuf>,
    /// Where hosted git repositories go [default: DATA/repos].
    #[arg(long, env = "GIT_XET_SERVER_GIT_DIR", value_name = "DIR")]
    git_dir: Option<PathBuf>,
}

fn engine(index: &IndexLocation) -> &'static str {
    match index {
        IndexLocation::Sqlite(_) => "sqlite",
        IndexLocation::Postgres(_) => "postgres",
    }
}

fn secret_of(config: &git_xet_deployment::DeploymentConfig) -> anyhow::Result<[u8; 32]> {
    match &config.index {
        IndexLocation::Sqlite(_) => {
            let path = git_xet_identity::keys::secret_path(&config.data_dir);
            let bytes =
                std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            bytes
                .as_slice()
                .try_into()
                .with_context(|| format!("{} should hold 32 bytes", path.display()))
        }
        IndexLocation::Postgres(url) => PgIndex::existing_secret(url)?
            .context("the PostgreSQL index has no server secret to back up"),
    }
}

pub(super) fn run_backup(args: BackupArgs) -> anyhow::Result<ExitCode> {
    crate::common::logging::init("warn");
    if let Some(BackupCommand::Verify(v)) = args.command {
        return verify(v);
    }
    let to = args.to.context("--to DEST is required")?;
    let dest = Dest::parse(&to)?;
    let config = args.deployment.config()?;
    let deployment = open_existing(&args.deployment)?;
    let opts = BackupOptions {
        repos_root: match args.git_dir {
            Some(dir) => dir,
            None => config.data_dir.join("repos"),
        },
        tmp_dir: config.tmp_dir(),
        secret: if args.exclude_secret {
            None
        } else {
            Some(secret_of(&config)?)
        },
        index_engine: engine(&config.index).to_string(),
    };
    let report = runtime()?.block_on(backup::backup(
        &*deployment.store,
        &deployment.index,
        &dest,
        &opts,
    ))?;
    println!(
        "snapshot {}: {} objects ({}), {} repositories{}",
        report.snapshot,
        report.objects,
        human_bytes(report.object_bytes),
        report.repositories,
        if args.exclude_secret {
            ", secret excluded"
        } else {
            ""
        }
    );
    println!(
        "copied {} new objects ({}) in {:.1}s",
        report.copied,
        human_bytes(report.copied_bytes),
        report.elapsed.as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

fn verify(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let dest = Dest::parse(&args.from)?;
    let report = runtime()?.block_on(backup::verify(
        &dest,
        args.snapshot.as_deref(),
        args.read_data,
    ))?;
    for problem in &report.problems {
        println!("{problem}");
    }
    if report.problems.is_empty() {
        println!(
            "snapshot {}: {} files and {} objects verified{}",
            report.snapshot,
            report.files,
            report.objects,
            if args.read_data {
                " (data read)"
            } else {
                " (sizes; --read-data reads them)"
            }
        );
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "snapshot {}: {} problems (listed above)",
            report.snapshot,
            report.problems.len()
        );
        Ok(ExitCode::FAILURE)
    }
}

pub(super) fn run_restore(args: RestoreArgs) -> anyhow::Result<ExitCode> {
    crate::common::logging::init("warn");
    let dest = Dest::parse(&args.from)?;
    let config = args.deployment.config()?;
    let secret = match &args.secret_file {
        Some(path) => {
            let bytes =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            Some(
                bytes
                    .as_slice()
                    .try_into()
                    .with_context(|| format!("{} should hold 32 bytes", path.display()))?,
            )
        }
        None => None,
    };
    let deployment = git_xet_deployment::open(&config, &config.tmp_dir(), true)?;
    let program = std::env::current_exe()
        .and_then(|exe| exe.canonicalize())
        .ok();
    let opts = RestoreOptions {
        snapshot: args.snapshot,
        repos_root: match args.git_dir {
            Some(dir) => dir,
            None => config.data_dir.join("repos"),
        },
        tmp_dir: config.tmp_dir(),
        index_location: config.index.clone(),
        data_dir: config.data_dir.clone(),
        secret,
        hook: git_xet_deployment::repos::hook_script(program.as_deref()),
    };
    let report = runtime()?.block_on(backup::restore(
        &*deployment.store,
        &deployment.index,
        &dest,
        &opts,
    ))?;
    println!(
        "restored snapshot {}: {} objects, {} repositories",
        report.snapshot, report.objects, report.repositories
    );
    Ok(ExitCode::SUCCESS)
}
