//! `git xet server import-lfs`: a whole LFS object store into one repository, offline.

use super::DedupScopeArg;
use std::process::ExitCode;

use super::deployment::DeploymentArgs;
use git_xet_deployment::StoreLocation;
use git_xet_index::RepoName;

#[derive(clap::Args, Debug)]
pub(super) struct ImportLfsArgs {
    /// Repository the objects are granted to, `name` or `org/name`.
    #[arg(long)]
    repo: String,
    /// The LFS object store: a directory, or `s3://BUCKET[/PREFIX]` in S3-compatible object
    /// storage; each object is a file or key named by its sha256 at any depth (`aa/bb/<oid>`
    /// as git-lfs, lfs-test-server, Gitea, GitLab; giftless: its `<org>/<repo>` directory).
    /// S3 credentials and endpoint come from the standard `AWS_*` environment variables
    /// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL` for
    /// other than AWS, `AWS_ALLOW_HTTP=true` for a plain-http endpoint).
    #[arg(long, value_name = "DIR|s3://BUCKET/PREFIX")]
    from: String,
    #[command(flatten)]
    deployment: DeploymentArgs,
    /// Objects converted at once (each holds one 64 MiB xorb in memory).
    #[arg(long, default_value_t = 2)]
    jobs: usize,
    /// Skip fsync (tests and benchmarks only).
    #[arg(long)]
    no_fsync: bool,
    /// The servers' --dedup-scope (`server`, `org`, `repo`): the import dedups only against
    /// content of the repository's scope.
    #[arg(
        long,
        value_enum,
        default_value = "server",
        env = "GIT_XET_SERVER_DEDUP_SCOPE"
    )]
    dedup_scope: DedupScopeArg,
}

pub(super) fn run(args: ImportLfsArgs) -> anyhow::Result<ExitCode> {
    use git_xet_io::human::human_bytes;
    use git_xet_server::import_lfs::{import, Counts, ImportOptions, Source};
    crate::common::logging::init("warn");
    let from = Source::parse(&args.from).map_err(|e| anyhow::anyhow!("--from {e}"))?;
    let repo = RepoName::parse(&args.repo).map_err(|e| anyhow::anyhow!("{e}"))?;
    let opts = ImportOptions {
        deployment: args.deployment.config()?,
        repo: repo.clone(),
        from,
        fsync: !args.no_fsync,
        jobs: args.jobs.max(1),
        dedup_scope: args.dedup_scope.into(),
    };
    let store = match &opts.deployment.object_store {
        StoreLocation::Dir(dir) => dir.display().to_string(),
        StoreLocation::S3 { bucket, prefix } => format!("s3://{bucket}/{prefix}"),
    };
    eprintln!(
        "importing LFS objects from {} into {repo} (objects stored in {store}, data directory {})",
        opts.from,
        opts.deployment.data_dir.display()
    );
    let bar = crate::common::terminal::terminal_bar("importing", 0);
    let started = std::time::Instant::now();
    let shown = bar.clone();
    let progress = Box::new(move |c: Counts| match &shown {
        Some(bar) => {
            bar.set_length(c.total_bytes);
            bar.set_position(c.bytes);
            bar.set_message(format!("{}/{} objects", c.done, c.total));
        }
        None if c.done % 100 == 0 || c.done == c.total => {
            eprintln!("[{}/{}] {} read", c.done, c.total, human_bytes(c.bytes));
        }
        None => {}
    });
    let report = import(&opts, progress)?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let ratio = git_xet_io::human::dedup_ratio(report.imported_bytes, report.stored_bytes);
    println!(
        "objects:        {} ({} converted now, {} already in {repo})",
        report.objects, report.imported, report.already
    );
    println!(
        "logical bytes:  {} ({})",
        report.logical_bytes,
        human_bytes(report.logical_bytes)
    );
    println!(
        "bytes stored:   {} ({})",
        report.stored_bytes,
        human_bytes(report.stored_bytes)
    );
    println!("dedup ratio:    {ratio} (logical bytes converted now / bytes stored)");
    println!("time:           {:.1}s", started.elapsed().as_secs_f64());
    if report.ignored > 0 {
        eprintln!(
            "{} files not named by a sha256 were left alone",
            report.ignored
        );
    }
    if report.mismatched.is_empty() {
        println!(
            "next: push the repository's history, e.g. `git push --mirror <server>/{repo}.git` \
             from a mirror clone of the old one"
        );
        return Ok(ExitCode::SUCCESS);
    }
    for m in &report.mismatched {
        eprintln!(
            "not imported: {} holds bytes hashing to {}, not its name",
            m.path.display(),
            m.actual
        );
    }
    anyhow::bail!(
        "{} objects do not match their names and were not imported (the rest were)",
        report.mismatched.len()
    )
}
