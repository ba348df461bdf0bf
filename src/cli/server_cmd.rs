//! `git xet server`: run the server, or manage its tokens.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::server::auth::{self, Scope};
use crate::server::keys::Keys;
use crate::server::repo_name::RepoName;
use crate::server::ServerConfig;

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ServerArgs {
    #[command(subcommand)]
    command: Option<ServerCommand>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(clap::Subcommand, Debug)]
enum ServerCommand {
    /// Manage access tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Import a whole LFS object store into one repository (server-side, no client): every
    /// object converted to XET content (deduplicated against everything stored), its sha256
    /// checked against its name, granted to the repository. Resumable: a re-run skips what
    /// is done. Then `git push --mirror` the repository to the server.
    ImportLfs(ImportLfsArgs),
}

#[derive(clap::Args, Debug)]
struct ImportLfsArgs {
    /// Repository the objects are granted to, `name` or `org/name`.
    #[arg(long)]
    repo: String,
    /// Directory of LFS objects, each a file named by its sha256 at any depth (`aa/bb/<oid>`
    /// as git-lfs, lfs-test-server, Gitea, GitLab; giftless: its `<org>/<repo>` directory).
    #[arg(long, value_name = "DIR")]
    from: String,
    /// The server's data directory.
    #[arg(long, env = "GIT_XET_SERVER_DATA")]
    data: Option<PathBuf>,
    /// Objects converted at once (each holds one 64 MiB xorb in memory).
    #[arg(long, default_value_t = 2)]
    jobs: usize,
    /// Skip fsync (tests and benchmarks only).
    #[arg(long)]
    no_fsync: bool,
}

#[derive(clap::Subcommand, Debug)]
enum TokenCommand {
    /// Print a new access token for one repository (no running server needed: the signing
    /// secret lives in the data directory). Use it as a Bearer token or as the HTTP Basic
    /// password (any user name) with git and git-lfs.
    Create(TokenCreateArgs),
}

#[derive(clap::Args, Debug)]
struct TokenCreateArgs {
    /// Repository, `name` or `org/name`.
    #[arg(long)]
    repo: String,
    /// `read` (clone, fetch, downloads) or `write` (also push and uploads).
    #[arg(long, value_parser = ["read", "write"])]
    scope: String,
    /// Lifetime in seconds (at least 1).
    #[arg(long, default_value_t = 30 * 24 * 3600,
          value_parser = clap::value_parser!(u64).range(1..))]
    ttl: u64,
    /// The server's data directory.
    #[arg(long, env = "GIT_XET_SERVER_DATA")]
    data: Option<PathBuf>,
    /// Create the data directory's signing secret if it has none (otherwise that is an
    /// error: a token signed with a new secret is refused by a server using another).
    #[arg(long)]
    init: bool,
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Address to listen on (loopback only by default).
    #[arg(long, default_value = "127.0.0.1:8484")]
    listen: SocketAddr,
    /// Data directory: objects, index, repositories, secret [default: the per-user data
    /// directory].
    #[arg(long, env = "GIT_XET_SERVER_DATA")]
    data: Option<PathBuf>,
    /// Base URL clients reach the server at, e.g. `https://xet.example.com` [default: from
    /// each request's Host header].
    #[arg(long)]
    public_url: Option<String>,
    /// Once listening, write the base URL to this file (atomically).
    #[arg(long)]
    ready_file: Option<PathBuf>,
    /// Allow reads (clone, fetch, LFS downloads) without a token.
    #[arg(long)]
    anonymous_read: bool,
    /// Act as a plain git-lfs server: never offer the `xet` transfer.
    #[arg(long)]
    basic_only: bool,
    /// Lifetime in seconds of the tokens handed out in LFS Batch API answers.
    #[arg(long, default_value_t = 3600)]
    token_ttl: u64,
    /// Lifetime in seconds of signed xorb fetch URLs.
    #[arg(long, default_value_t = 300)]
    fetch_url_ttl: u64,
    /// Rotation period in seconds of the global-dedup chunk key.
    #[arg(long, default_value_t = 6 * 3600)]
    dedup_key_period: u64,
    /// Largest git-lfs basic upload accepted, in bytes [default: 64 GiB].
    #[arg(long)]
    max_object_size: Option<u64>,
    /// Xorb and shard uploads validated at once, and separately basic uploads converted at
    /// once (each conversion holds one 64 MiB xorb in memory); more wait their turn.
    #[arg(long, default_value_t = 8)]
    max_concurrent_uploads: usize,
    /// Seconds a client has to send a request's headers.
    #[arg(long, default_value_t = 20)]
    header_timeout: u64,
    /// Seconds without a byte either way after which a connection is closed (a silent
    /// client, a stalled upload, a client that stopped reading).
    #[arg(long, default_value_t = 60)]
    idle_timeout: u64,
    /// Connections open at once from one client address; more are closed on accept.
    #[arg(long, default_value_t = 256)]
    max_connections_per_address: usize,
    /// Skip fsync (tests and benchmarks only: a power loss may lose recent uploads).
    #[arg(long)]
    no_fsync: bool,
}

fn default_data_dir() -> anyhow::Result<PathBuf> {
    let dirs = directories::ProjectDirs::from("", "", "git-xet")
        .context("cannot find a per-user data directory; pass --data DIR")?;
    Ok(dirs.data_dir().join("server"))
}

fn data_dir(arg: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match arg {
        Some(dir) => Ok(dir),
        None => default_data_dir(),
    }
}

pub fn run(args: ServerArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        Some(ServerCommand::Token(TokenCommand::Create(a))) => token_create(a),
        Some(ServerCommand::ImportLfs(a)) => import_lfs(a),
        None => serve(args.run),
    }
}

fn token_create(args: TokenCreateArgs) -> anyhow::Result<ExitCode> {
    let repo = RepoName::parse(&args.repo).map_err(|e| anyhow::anyhow!("{e}"))?;
    let scope = Scope::parse(&args.scope).context("scope must be read or write")?;
    let data = data_dir(args.data)?;
    let keys = if args.init {
        std::fs::create_dir_all(&data).with_context(|| format!("creating {}", data.display()))?;
        Keys::load_or_create(&data)
    } else {
        Keys::load(&data)
    };
    let keys = keys.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => anyhow::anyhow!(
            "{} has no server secret ({} is missing): pass the data directory the server \
             uses (--data or GIT_XET_SERVER_DATA), start the server once, or pass --init to \
             create a new secret there",
            data.display(),
            crate::server::keys::secret_path(&data).display()
        ),
        _ => anyhow::Error::new(e)
            .context(format!("loading the server secret in {}", data.display())),
    })?;
    let (token, _exp) = auth::issue(&keys, &repo, scope, args.ttl);
    println!("{token}");
    Ok(ExitCode::SUCCESS)
}

fn import_lfs(args: ImportLfsArgs) -> anyhow::Result<ExitCode> {
    use crate::client::stats::human_bytes;
    use crate::server::import_lfs::{import, Counts, ImportOptions};
    crate::cli::logging::init("warn");
    anyhow::ensure!(
        !args.from.contains("://"),
        "--from {}: only a local directory can be read; copy object storage to one first \
         (e.g. `aws s3 sync s3://BUCKET/PREFIX DIR`) and import that",
        args.from
    );
    let repo = RepoName::parse(&args.repo).map_err(|e| anyhow::anyhow!("{e}"))?;
    let opts = ImportOptions {
        data_dir: data_dir(args.data)?,
        repo: repo.clone(),
        from: PathBuf::from(&args.from),
        fsync: !args.no_fsync,
        jobs: args.jobs.max(1),
    };
    eprintln!(
        "importing LFS objects from {} into {repo} (data directory {})",
        opts.from.display(),
        opts.data_dir.display()
    );
    let bar = crate::client::progress::terminal_bar("importing", 0);
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
    let ratio = crate::client::stats::dedup_ratio(report.imported_bytes, report.stored_bytes);
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

fn serve(args: RunArgs) -> anyhow::Result<ExitCode> {
    crate::cli::logging::init("info");
    let mut config = ServerConfig::new(args.listen, data_dir(args.data)?);
    if let Some(url) = args.public_url {
        let url = url.trim_end_matches('/').to_string();
        anyhow::ensure!(
            url.starts_with("http://") || url.starts_with("https://"),
            "--public-url must start with http:// or https://"
        );
        config.public_url = Some(url);
    }
    config.ready_file = args.ready_file;
    config.anonymous_read = args.anonymous_read;
    config.basic_only = args.basic_only;
    config.cas_token_ttl = Duration::from_secs(args.token_ttl.max(60));
    config.fetch_url_ttl = Duration::from_secs(args.fetch_url_ttl.max(1));
    config.dedup_key_period = Duration::from_secs(args.dedup_key_period.max(60));
    if let Some(max) = args.max_object_size {
        config.max_object_size = max;
    }
    config.max_concurrent_uploads = args.max_concurrent_uploads.max(1);
    config.fsync = !args.no_fsync;
    config.limits = crate::server::listen::Limits {
        header_timeout: Duration::from_secs(args.header_timeout.max(1)),
        idle_timeout: Duration::from_secs(args.idle_timeout.max(1)),
        max_per_address: args.max_connections_per_address.max(1),
    };
    // Hosted repositories' pre-receive hook runs this binary's built-in check.
    config.hook_program = std::env::current_exe()
        .and_then(|exe| exe.canonicalize())
        .ok();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("git-xet-server")
        .build()
        .context("starting the async runtime")?;
    let result = runtime.block_on(crate::server::run(config));
    // Blocking work still running (a large upload being registered) gets a moment to finish.
    runtime.shutdown_timeout(Duration::from_secs(10));
    result?;
    Ok(ExitCode::SUCCESS)
}
