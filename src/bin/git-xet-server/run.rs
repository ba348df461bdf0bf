//! `git xet server` with no subcommand: run the server.

use super::DedupScopeArg;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use super::deployment::DeploymentArgs;
use git_xet_server::ServerConfig;

#[derive(clap::Args, Debug)]
pub(super) struct RunArgs {
    /// Address to listen on (loopback only by default).
    #[arg(long, default_value = "127.0.0.1:8484", env = "GIT_XET_SERVER_LISTEN")]
    listen: SocketAddr,
    #[command(flatten)]
    deployment: DeploymentArgs,
    /// Base URL clients reach the server at, e.g. `https://xet.example.com` [default: from
    /// each request's Host header].
    #[arg(long, env = "GIT_XET_SERVER_PUBLIC_URL")]
    public_url: Option<String>,
    /// Once listening, write the base URL to this file (atomically).
    #[arg(long, env = "GIT_XET_SERVER_READY_FILE")]
    ready_file: Option<PathBuf>,
    /// Allow reads (clone, fetch, LFS downloads) without a token.
    #[arg(long, env = "GIT_XET_SERVER_ANONYMOUS_READ",
          value_parser = clap::builder::BoolishValueParser::new())]
    anonymous_read: bool,
    /// Act as a plain git-lfs server: never offer the `xet` transfer.
    #[arg(long, env = "GIT_XET_SERVER_BASIC_ONLY",
          value_parser = clap::builder::BoolishValueParser::new())]
    basic_only: bool,
    /// Lifetime in seconds of the tokens handed out in LFS Batch API answers.
    #[arg(long, default_value_t = 3600, env = "GIT_XET_SERVER_TOKEN_TTL")]
    token_ttl: u64,
    /// Lifetime in seconds of signed xorb fetch URLs.
    #[arg(long, default_value_t = 300, env = "GIT_XET_SERVER_FETCH_URL_TTL")]
    fetch_url_ttl: u64,
    /// Hand out presigned S3 URLs in reconstructions, so that clients fetch xorb bytes
    /// straight from the object store (which they must be able to reach) instead of through
    /// this server. Needs an s3:// object store.
    #[arg(
        long,
        env = "GIT_XET_SERVER_PRESIGN",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    presign: bool,
    /// Rotation period in seconds of the global-dedup chunk key.
    #[arg(long, default_value_t = 6 * 3600, env = "GIT_XET_SERVER_DEDUP_KEY_PERIOD")]
    dedup_key_period: u64,
    /// How far deduplication reaches: `server` (every repository dedups against all
    /// others: one team), `org` (within the first component of the repository name) or
    /// `repo`. A scoped server tells no request about another scope's chunks or xorbs, at
    /// the cost of storing content again per scope.
    #[arg(
        long,
        value_enum,
        default_value = "server",
        env = "GIT_XET_SERVER_DEDUP_SCOPE"
    )]
    dedup_scope: DedupScopeArg,
    /// Largest git-lfs basic upload accepted, in bytes [default: 64 GiB].
    #[arg(long, env = "GIT_XET_SERVER_MAX_OBJECT_SIZE")]
    max_object_size: Option<u64>,
    /// Xorb and shard uploads validated at once, and separately basic uploads converted at
    /// once (each conversion holds one 64 MiB xorb in memory); more wait their turn.
    #[arg(
        long,
        default_value_t = 8,
        env = "GIT_XET_SERVER_MAX_CONCURRENT_UPLOADS"
    )]
    max_concurrent_uploads: usize,
    /// Milliseconds a shard upload waits for the xorbs its client names as still being sent
    /// (git-xet clients send the shard of a round of small files with its xorbs); 0: such
    /// shards are validated at once and clients are not told they may send them early.
    #[arg(
        long,
        default_value_t = 30_000,
        env = "GIT_XET_SERVER_SHARD_XORB_WAIT_MS"
    )]
    shard_xorb_wait_ms: u64,
    /// Shard uploads waiting so at once (an eighth of them per repository); more are
    /// validated at once.
    #[arg(long, default_value_t = 256, env = "GIT_XET_SERVER_MAX_WAITING_SHARDS")]
    max_waiting_shards: usize,
    /// Seconds a client has to send a request's headers.
    #[arg(long, default_value_t = 20, env = "GIT_XET_SERVER_HEADER_TIMEOUT")]
    header_timeout: u64,
    /// Seconds the server waits on a client (for a request, body bytes or room to write)
    /// before it closes the connection (a silent client, a stalled upload, a client that
    /// stopped reading); time spent handling a request is not counted.
    #[arg(long, default_value_t = 60, env = "GIT_XET_SERVER_IDLE_TIMEOUT")]
    idle_timeout: u64,
    /// Connections open at once from one client address; more are closed on accept.
    #[arg(
        long,
        default_value_t = 256,
        env = "GIT_XET_SERVER_MAX_CONNECTIONS_PER_ADDRESS"
    )]
    max_connections_per_address: usize,
    /// Connections open at once in all (from any number of addresses); more are closed on
    /// accept. Lowered to leave room under the open-files limit (ulimit -n).
    #[arg(long, default_value_t = 4096, env = "GIT_XET_SERVER_MAX_CONNECTIONS")]
    max_connections: usize,
    /// Serve `GET /metrics` on this address (e.g. 127.0.0.1:9100) to anyone reaching it, and
    /// nowhere else. Without it, the main listener answers /metrics to clients on this host
    /// only (not through a proxy).
    #[arg(long, value_name = "ADDR", env = "GIT_XET_SERVER_METRICS_LISTEN")]
    metrics_listen: Option<std::net::SocketAddr>,
    /// Locks one repository may hold; more are refused (507) until some are released.
    #[arg(
        long,
        default_value_t = 100_000,
        env = "GIT_XET_SERVER_MAX_LOCKS_PER_REPO"
    )]
    max_locks_per_repo: u64,
    /// Serve HTTPS with this PEM certificate chain (server certificate first); needs
    /// --tls-key. Without both, plain HTTP (for a reverse proxy in front).
    #[arg(
        long,
        env = "GIT_XET_SERVER_TLS_CERT",
        value_name = "PEM",
        requires = "tls_key"
    )]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(
        long,
        env = "GIT_XET_SERVER_TLS_KEY",
        value_name = "PEM",
        requires = "tls_cert"
    )]
    tls_key: Option<PathBuf>,
    /// A reverse proxy (address or network, `ADDR[/PREFIX]`; repeatable, or comma-separated
    /// in the variable) whose `Forwarded` / `X-Forwarded-Proto` / `X-Forwarded-Host` headers
    /// set the scheme and host of the URLs the server hands out. From other peers those
    /// headers are ignored. --public-url wins over both.
    #[arg(
        long,
        env = "GIT_XET_SERVER_TRUSTED_PROXY",
        value_name = "ADDR[/PREFIX]",
        value_delimiter = ','
    )]
    trusted_proxy: Vec<git_xet_server::proxy::Network>,
    /// Where hosted git repositories live [default: DATA/repos]: a directory all server
    /// processes share (e.g. NFS) when several serve one deployment.
    #[arg(
        long,
        env = "GIT_XET_SERVER_GIT_DIR",
        value_name = "DIR",
        conflicts_with = "no_git"
    )]
    git_dir: Option<PathBuf>,
    /// Host no git repositories (git over HTTP answers 404): git-lfs and XET only, for
    /// teams whose git lives elsewhere and who point `lfs.url` at this server.
    #[arg(long, env = "GIT_XET_SERVER_NO_GIT",
          value_parser = clap::builder::BoolishValueParser::new())]
    no_git: bool,
    /// Accept OpenID Connect tokens (JWTs, as a Bearer token or the HTTP Basic password)
    /// from this issuer, e.g. `https://token.actions.githubusercontent.com` (https; plain
    /// http only on a loopback address). Needs --oidc-audience and --policy.
    #[arg(long, env = "GIT_XET_SERVER_OIDC_ISSUER", value_name = "URL",
          requires_all = ["oidc_audience", "policy"])]
    oidc_issuer: Option<String>,
    /// The audience (`aud`) OIDC tokens must be issued for.
    #[arg(
        long,
        env = "GIT_XET_SERVER_OIDC_AUDIENCE",
        value_name = "AUD",
        requires = "oidc_issuer"
    )]
    oidc_audience: Option<String>,
    /// The OIDC claim whose values the policy's `group:` lines match (a string or a list).
    #[arg(long, env = "GIT_XET_SERVER_OIDC_CLAIM", default_value = "groups")]
    oidc_claim: String,
    /// The policy file mapping OIDC identities to rules (`group:ml-team org/*:write`,
    /// `sub:alice org/model:read`); read again when it changes or on SIGHUP.
    #[arg(
        long,
        env = "GIT_XET_SERVER_POLICY",
        value_name = "FILE",
        requires = "oidc_issuer"
    )]
    policy: Option<PathBuf>,
    /// Log lines as `text` (for people, journald) or `json` (one object per line, with the
    /// request id of each request's lines).
    #[arg(
        long,
        value_enum,
        default_value = "text",
        env = "GIT_XET_SERVER_LOG_FORMAT"
    )]
    log_format: LogFormatArg,
    /// Skip fsync (tests and benchmarks only: a power loss may lose recent uploads).
    #[arg(long, env = "GIT_XET_SERVER_NO_FSYNC",
          value_parser = clap::builder::BoolishValueParser::new())]
    no_fsync: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum LogFormatArg {
    Text,
    Json,
}

pub(super) fn serve(args: RunArgs) -> anyhow::Result<ExitCode> {
    let format = match args.log_format {
        LogFormatArg::Text => crate::common::logging::LogFormat::Text,
        LogFormatArg::Json => crate::common::logging::LogFormat::Json,
    };
    crate::common::logging::init_with("info", format);
    let mut config = ServerConfig::new(args.listen, args.deployment.data_dir()?);
    config.deployment = args.deployment.config()?;
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
    anyhow::ensure!(
        !args.presign
            || matches!(
                config.deployment.object_store,
                git_xet_deployment::StoreLocation::S3 { .. }
            ),
        "--presign needs an S3 object store (--object-store s3://BUCKET[/PREFIX]): a directory \
         has no presigned URLs"
    );
    config.presign = args.presign;
    config.dedup_key_period = Duration::from_secs(args.dedup_key_period.max(60));
    config.dedup_scope = args.dedup_scope.into();
    if let Some(max) = args.max_object_size {
        config.max_object_size = max;
    }
    config.max_concurrent_uploads = args.max_concurrent_uploads.max(1);
    config.shard_xorb_wait = Duration::from_millis(args.shard_xorb_wait_ms);
    config.max_waiting_shards = args.max_waiting_shards;
    config.fsync = !args.no_fsync;
    if let (Some(cert), Some(key)) = (args.tls_cert, args.tls_key) {
        config.tls = Some(git_xet_server::tls::TlsFiles { cert, key });
    }
    config.trusted_proxies = git_xet_server::proxy::TrustedProxies(args.trusted_proxy);
    config.git_dir = args.git_dir.map(|d| std::path::absolute(&d).unwrap_or(d));
    config.no_git = args.no_git;
    config.metrics_listen = args.metrics_listen;
    config.max_locks_per_repo = args.max_locks_per_repo.max(1);
    config.limits = git_xet_server::listen::Limits {
        header_timeout: Duration::from_secs(args.header_timeout.max(1)),
        idle_timeout: Duration::from_secs(args.idle_timeout.max(1)),
        max_per_address: args.max_connections_per_address.max(1),
        max_connections: args.max_connections.max(1),
    };
    // Hosted repositories' pre-receive hook runs this binary's built-in check.
    config.hook_program = std::env::current_exe()
        .and_then(|exe| exe.canonicalize())
        .ok();
    if let (Some(issuer), Some(audience), Some(policy)) =
        (args.oidc_issuer, args.oidc_audience, args.policy)
    {
        let settings = git_xet_identity::OidcSettings {
            issuer,
            audience,
            claim: args.oidc_claim,
            policy,
        };
        let oidc = git_xet_identity::Oidc::new(settings).context("--oidc-issuer / --policy")?;
        config.oidc = Some(std::sync::Arc::new(oidc));
    }
    let runtime = git_xet_io::runtime::handle().context("starting the async runtime")?;
    if let Some(oidc) = config.oidc.clone() {
        // SIGHUP reads the policy file again.
        runtime.spawn(async move {
            use tokio::signal::unix::{signal, SignalKind};
            let Ok(mut hup) = signal(SignalKind::hangup()) else {
                return;
            };
            while hup.recv().await.is_some() {
                oidc.reload_policy();
            }
        });
    }
    let result = runtime.block_on(git_xet_server::run(config));
    // Blocking work still running (a large upload being registered) gets a moment to finish.
    git_xet_io::runtime::shutdown(Duration::from_secs(10));
    result?;
    Ok(ExitCode::SUCCESS)
}
