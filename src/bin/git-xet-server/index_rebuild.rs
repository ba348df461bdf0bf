//! `git xet server index rebuild` and `index check` (git_xet_upkeep::rebuild):
//! bringing a lost index back from the object store and the git repositories, and comparing
//! a live index with such a rebuild. How each thing the index holds comes back, or fails
//! closed, is in docs/server-operations.md ("Index rebuild").

use super::DedupScopeArg;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;

use super::deployment::DeploymentArgs;
use super::upkeep::{open_existing, runtime};
use git_xet_deployment::IndexLocation;
use git_xet_identity::keys;
use git_xet_index::{Index, PgIndex, SqliteIndex, TokenRecord};
use git_xet_upkeep::rebuild::{compare, rebuild, RebuildOptions, RebuildReport};

#[derive(clap::Subcommand, Debug)]
pub(super) enum IndexCommand {
    /// Rebuild a lost or damaged index, into an empty one (embedded or PostgreSQL), from the
    /// object store (xorbs, shards) and the hosted git repositories (each repository's LFS
    /// pointers in all refs, each verified by rebuilding the file and hashing it). Token
    /// records, revocations and locks are not in those sources: say how to treat revoked
    /// tokens with --revoked-tokens FILE or --forget-revocations.
    Rebuild(RebuildArgs),
    /// Compare the live index with a rebuild (made in a scratch index; nothing is changed).
    /// Exits non-zero listing every difference.
    Check(CheckArgs),
}

#[derive(clap::Args, Debug)]
pub(super) struct SourceArgs {
    #[command(flatten)]
    deployment: DeploymentArgs,
    /// Where hosted git repositories live [default: the running server's, else DATA/repos].
    #[arg(long, env = "GIT_XET_SERVER_GIT_DIR", value_name = "DIR")]
    git_dir: Option<PathBuf>,
    /// The servers' --dedup-scope (the domain files are registered in).
    #[arg(
        long,
        value_enum,
        default_value = "server",
        env = "GIT_XET_SERVER_DEDUP_SCOPE"
    )]
    dedup_scope: DedupScopeArg,
    /// Hash a stored file only where several claim one LFS object, instead of every file
    /// (faster; the servers then check each claim on its first download, as they do for
    /// uploads).
    #[arg(long)]
    trust_sha256_claims: bool,
}

#[derive(clap::Args, Debug)]
pub(super) struct RebuildArgs {
    #[command(flatten)]
    source: SourceArgs,
    /// The deployment's old signing secret (a copy of DATA/keys/secret, 32 bytes), so that
    /// tokens issued before the loss stay valid. Without it (and without a surviving
    /// DATA/keys/secret on the embedded index) a new secret is made: every token must be
    /// re-issued.
    #[arg(long, value_name = "FILE")]
    secret_file: Option<PathBuf>,
    /// With the old secret: token ids to record as revoked, one a line (as `token list`
    /// printed them); the list of revocations was in the lost index.
    #[arg(long, value_name = "FILE")]
    revoked_tokens: Option<PathBuf>,
    /// With the old secret: accept that revocations made before the loss are forgotten
    /// (revoked tokens become valid again until they expire).
    #[arg(long, conflicts_with = "revoked_tokens")]
    forget_revocations: bool,
}

#[derive(clap::Args, Debug)]
pub(super) struct CheckArgs {
    #[command(flatten)]
    source: SourceArgs,
}

pub(super) fn run(command: IndexCommand) -> anyhow::Result<ExitCode> {
    crate::common::logging::init("warn");
    match command {
        IndexCommand::Rebuild(args) => run_rebuild(args),
        IndexCommand::Check(args) => run_check(args),
    }
}

impl SourceArgs {
    fn git_root(&self) -> anyhow::Result<PathBuf> {
        Ok(match &self.git_dir {
            Some(dir) => std::path::absolute(dir).unwrap_or(dir.clone()),
            None => git_xet_deployment::running::repos_dir(&self.deployment.data_dir()?),
        })
    }

    fn options(&self) -> RebuildOptions {
        RebuildOptions {
            dedup_scope: self.dedup_scope.into(),
            verify_sha256: !self.trust_sha256_claims,
            progress: true,
        }
    }
}

/// Where the rebuilt deployment's signing secret comes from.
enum Secret {
    /// The embedded data directory's secret survived.
    Kept,
    /// `--secret-file`, to install.
    Given([u8; 32]),
    /// A new one is made.
    New,
}

fn run_rebuild(args: RebuildArgs) -> anyhow::Result<ExitCode> {
    let config = args.source.deployment.config()?;
    let data = config.data_dir.clone();
    let given = match &args.secret_file {
        Some(path) => Some(
            keys::read_secret_file(path)
                .with_context(|| format!("reading --secret-file {}", path.display()))?,
        ),
        None => None,
    };
    let secret = match (&config.index, given) {
        (IndexLocation::Sqlite(_), given) if keys::secret_path(&data).exists() => {
            if let Some(given) = given {
                anyhow::ensure!(
                    keys::Keys::from_secret(&given).token_mac(b"probe")
                        == keys::Keys::load(&data)?.token_mac(b"probe"),
                    "{} holds another secret than --secret-file: move one of them away",
                    keys::secret_path(&data).display()
                );
            }
            Secret::Kept
        }
        (IndexLocation::Postgres(url), given) => match PgIndex::existing_secret(url)? {
            Some(_) => Secret::Kept,
            None => given.map_or(Secret::New, Secret::Given),
        },
        (_, given) => given.map_or(Secret::New, Secret::Given),
    };
    let old_secret = !matches!(secret, Secret::New);
    // Decided before anything is written: a kept secret keeps old tokens valid, and the
    // revocations that stopped some of them were in the lost index.
    anyhow::ensure!(
        !old_secret || args.revoked_tokens.is_some() || args.forget_revocations,
        "the rebuilt index keeps the old signing secret, so tokens issued before stay valid, \
         but which of them were revoked was in the lost index: pass --revoked-tokens FILE \
         (the revoked ids, from a saved `git xet server token list` or a backup), or \
         --forget-revocations to accept that revoked tokens work again until they expire; \
         or rebuild without the old secret (every token must then be re-issued)"
    );
    let revoked = match &args.revoked_tokens {
        Some(path) => read_ids(path)?,
        None => Vec::new(),
    };
    // On the embedded index no server may run on the data directory meanwhile (it would
    // keep writing to the index it has open); on PostgreSQL the operator stops them.
    let _lock = match &config.index {
        IndexLocation::Sqlite(_) => Some(lock_data_dir(&data)?),
        IndexLocation::Postgres(_) => None,
    };
    ensure_empty(&config.index)?;
    match (&secret, &config.index) {
        (Secret::Given(s), IndexLocation::Sqlite(_)) => keys::install_secret(&data, s)
            .with_context(|| format!("installing the secret in {}", data.display()))?,
        (Secret::Given(s), IndexLocation::Postgres(url)) => {
            let stored = PgIndex::open(url)?.install_secret(s)?;
            anyhow::ensure!(
                &stored == s,
                "a server created another secret in the index meanwhile: stop the servers, \
                 empty the index and run the rebuild again"
            );
        }
        _ => {}
    }
    // SQLite commits unsynced (a rebuild cut short is started again on an empty index), and
    // is synced once at the end: one fsync per registration dominated its time.
    let deployment = git_xet_deployment::open(&config, &config.tmp_dir(), false)?;
    let index = deployment.index.clone();
    for id in &revoked {
        let record = TokenRecord {
            id: id.clone(),
            user: "(revoked before an index rebuild)".into(),
            repo: String::new(),
            scope: "read".into(),
            created: 0,
            expires: 0,
            revoked: true,
        };
        index.record_token(&record)?;
    }
    let git_root = args.source.git_root()?;
    let started = Instant::now();
    let report = runtime()?.block_on(rebuild(
        &*deployment.store,
        &index,
        &git_root,
        args.source.options(),
    ))?;
    if let IndexLocation::Sqlite(path) = &config.index {
        sync_sqlite(path)?;
    }
    let secs = started.elapsed().as_secs_f64();
    print_report(&report, secs);
    eprintln!();
    match secret {
        Secret::New => eprintln!(
            "WARNING: the rebuilt index has a NEW signing secret: every token issued before \
             is refused. Issue new tokens (`git xet server token create`) and add ssh users \
             again (`git xet server user add`); restart every server process so that all \
             sign with the new secret."
        ),
        Secret::Kept | Secret::Given(_) => eprintln!(
            "The old signing secret is kept: tokens issued before stay valid; {} recorded \
             revoked. `git xet server token list` no longer lists the old tokens.",
            revoked.len()
        ),
    }
    eprintln!(
        "Not restored (not in the object store or the repositories): LFS locks (users lock \
         again), token records, and LFS objects uploaded but never pushed (clients upload them \
         again on their next push)."
    );
    if !report.unknown_visibility.is_empty() {
        eprintln!(
            "{} repositories recorded no visibility and were made PRIVATE: {}. Make one \
             public with `git --git-dir REPO config xet.private false` and rebuild, or \
             recreate it.",
            report.unknown_visibility.len(),
            names(&report.unknown_visibility)
        );
    }
    for finding in &report.findings {
        eprintln!("not restored: {finding}");
    }
    if report.findings.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "{} things could not be restored (above); the rest is in place",
            report.findings.len()
        );
        Ok(ExitCode::FAILURE)
    }
}

fn names(repos: &[git_xet_index::RepoName]) -> String {
    repos
        .iter()
        .map(|r| r.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn print_report(report: &RebuildReport, secs: f64) {
    let secs_div = secs.max(0.001);
    println!(
        "xorbs indexed: {} ({} MB)",
        report.xorbs,
        report.xorb_bytes / 1_000_000
    );
    println!("shards read: {}", report.shards);
    println!("repositories: {}", report.repos);
    println!("LFS pointers: {}", report.pointers);
    println!(
        "files registered: {} ({} repository-file visibilities)",
        report.files, report.repo_files
    );
    println!(
        "files hashed: {} ({} MB, {:.1} MB/s)",
        report.files_hashed,
        report.bytes_hashed / 1_000_000,
        report.bytes_hashed as f64 / 1e6 / secs_div
    );
    println!(
        "private repositories: {} ({} without a record)",
        report.private_repos.len(),
        report.unknown_visibility.len()
    );
    println!(
        "took {secs:.1} s ({:.1} files/s)",
        report.repo_files as f64 / secs_div
    );
}

/// Token ids, one a line (blank lines and `#` comments skipped), or a saved `token list`
/// table, whose rows count only when their status says `revoked`.
fn read_ids(path: &Path) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading --revoked-tokens {}", path.display()))?;
    Ok(text
        .lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                [id] if !id.starts_with('#') => Some(id.to_string()),
                [id, .., "revoked"] if !id.starts_with('#') => Some(id.to_string()),
                _ => None,
            }
        })
        .collect())
}

/// Makes every commit to the SQLite index durable.
fn sync_sqlite(path: &Path) -> anyhow::Result<()> {
    SqliteIndex::sync_file(path).with_context(|| format!("syncing {}", path.display()))
}

/// The data directory's server lock (`DATA/server.lock`), or an error when a server holds it.
fn lock_data_dir(data: &Path) -> anyhow::Result<std::fs::File> {
    use git_xet_io::platform::file::{lock, Lock};
    std::fs::create_dir_all(data)?;
    let path = data.join("server.lock");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    match lock(&file, Lock::ExclusiveNow) {
        Ok(()) => Ok(file),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => anyhow::bail!(
            "a server runs on {} (it holds {}): stop it before rebuilding its index",
            data.display(),
            path.display()
        ),
        Err(e) => Err(e).with_context(|| format!("locking {}", path.display())),
    }
}

/// Refuses an index that holds anything: a rebuild adds to nothing.
fn ensure_empty(location: &IndexLocation) -> anyhow::Result<()> {
    let index: Arc<dyn Index> = match location {
        IndexLocation::Sqlite(path) => {
            if !path.exists() {
                return Ok(());
            }
            Arc::new(SqliteIndex::open(path, true)?)
        }
        IndexLocation::Postgres(url) => Arc::new(PgIndex::open(url)?),
    };
    let stats = index.stats()?;
    let tokens = index.tokens()?.len();
    anyhow::ensure!(
        stats.xorbs == 0 && stats.files == 0 && tokens == 0,
        "the index is not empty ({} xorbs, {} files, {tokens} tokens): `index rebuild` fills \
         an empty index. Move the damaged SQLite file away, or drop and create the \
         PostgreSQL database, then run it again (`index check` compares a live index with a \
         rebuild without changing it)",
        stats.xorbs,
        stats.files
    );
    Ok(())
}

fn run_check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let live = open_existing(&args.source.deployment)?;
    let config = args.source.deployment.config()?;
    std::fs::create_dir_all(config.tmp_dir())?;
    let scratch = tempfile::Builder::new()
        .prefix("index-check-")
        .tempdir_in(config.tmp_dir())
        .context("making a scratch directory for the rebuild")?;
    let rebuilt: Arc<dyn Index> = Arc::new(SqliteIndex::open(
        &scratch.path().join("index.sqlite"),
        false,
    )?);
    let git_root = args.source.git_root()?;
    let repos: Vec<_> = git_xet_deployment::repos::hosted(&git_root)?
        .into_iter()
        .map(|r| r.name)
        .collect();
    let runtime = runtime()?;
    let report = runtime.block_on(rebuild(
        &*live.store,
        &rebuilt,
        &git_root,
        args.source.options(),
    ))?;
    for finding in &report.findings {
        eprintln!("note: a rebuild could not restore: {finding}");
    }
    let differences = runtime.block_on(compare::compare(&live.index, &rebuilt, &repos))?;
    println!("repositories: {}", report.repos);
    println!("files in a rebuild: {}", report.files);
    if differences.is_empty() {
        println!("the live index matches a rebuild");
        return Ok(ExitCode::SUCCESS);
    }
    for difference in &differences {
        println!("difference: {difference}");
    }
    eprintln!(
        "{} differences between the live index and a rebuild",
        differences.len()
    );
    Ok(ExitCode::FAILURE)
}
