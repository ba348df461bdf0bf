//! Server settings, filled by the command line.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// This process's working space (staging files under `tmp/`, hosted repositories) and,
    /// by default, everything else.
    pub data_dir: PathBuf,
    /// Where the object store, index and secret live.
    pub deployment: git_xet_deployment::DeploymentConfig,
    /// Base URL clients reach this server at (no trailing slash). Without it, URLs are
    /// built from the request's `Host` header.
    pub public_url: Option<String>,
    /// Written with the base URL once the listener is bound.
    pub ready_file: Option<PathBuf>,
    /// Reads (clone, fetch, LFS download) need no credential.
    pub anonymous_read: bool,
    /// Never offer the `xet` transfer: a plain git-lfs server.
    pub basic_only: bool,
    /// Lifetime of the tokens the server hands out in LFS Batch API actions.
    pub cas_token_ttl: Duration,
    /// Lifetime of signed xorb fetch URLs.
    pub fetch_url_ttl: Duration,
    /// Reconstructions hand out presigned object-store URLs instead of URLs to this server.
    pub presign: bool,
    /// How often the global-dedup chunk key rotates.
    pub dedup_key_period: Duration,
    /// Which repositories' xorbs a request may dedup against (index/scope.rs).
    pub dedup_scope: git_xet_index::DedupScope,
    /// Largest git-lfs basic upload accepted.
    pub max_object_size: u64,
    /// Largest git push (request body of git-receive-pack) accepted.
    pub max_push_size: u64,
    /// Requests holding a xorb in memory at once (xorb and shard uploads, basic conversions).
    pub max_concurrent_uploads: usize,
    /// How long a shard upload waits for the xorbs its client names as still on their way
    /// (cas/xorb_waits.rs); zero: such shards are validated at once, and clients not told.
    pub shard_xorb_wait: Duration,
    /// Shard uploads waiting so at once (an eighth of them per repository); more are
    /// validated at once.
    pub max_waiting_shards: usize,
    /// fsync objects and the index. Off only for throwaway servers (tests, benchmarks).
    pub fsync: bool,
    /// How long shutdown waits for in-flight requests.
    pub shutdown_grace: Duration,
    /// The git-xet binary whose built-in `pre-receive` check hosted repositories' hook runs;
    /// without it they get hooks/pre-receive, which runs the git-xet found on PATH.
    pub hook_program: Option<PathBuf>,
    /// Connections per client address, header deadline, inactivity timeout.
    pub limits: crate::listen::Limits,
    /// Serve HTTPS with this certificate and key; plain HTTP without.
    pub tls: Option<crate::tls::TlsFiles>,
    /// Peers whose `Forwarded`/`X-Forwarded-*` headers say the scheme and host of URLs.
    pub trusted_proxies: crate::proxy::TrustedProxies,
    /// Where hosted git repositories live [default: DATA/repos]; may be a filesystem several
    /// server processes share (git's lock files keep concurrent pushes safe).
    pub git_dir: Option<PathBuf>,
    /// Serve no git (LFS and CAS only): git over HTTP answers 404.
    pub no_git: bool,
    /// A listener of its own for `GET /metrics`; the main listener then answers it 404.
    /// Without it, the main listener answers `/metrics` to clients on this host only.
    pub metrics_listen: Option<SocketAddr>,
    /// Locks one repository may hold.
    pub max_locks_per_repo: u64,
    /// OpenID Connect tokens accepted beside the server's own (`--oidc-issuer`).
    pub oidc: Option<std::sync::Arc<git_xet_identity::Oidc>>,
}

impl ServerConfig {
    pub fn new(listen: SocketAddr, data_dir: PathBuf) -> ServerConfig {
        // Absolute: hosted-repository commands run git in other directories.
        let data_dir = std::path::absolute(&data_dir).unwrap_or(data_dir);
        ServerConfig {
            listen,
            deployment: git_xet_deployment::DeploymentConfig::embedded(&data_dir),
            data_dir,
            public_url: None,
            ready_file: None,
            anonymous_read: false,
            basic_only: false,
            cas_token_ttl: Duration::from_secs(3600),
            fetch_url_ttl: Duration::from_secs(300),
            presign: false,
            dedup_key_period: Duration::from_secs(6 * 3600),
            dedup_scope: Default::default(),
            // Larger than any model file in practice, small enough that a refused upload
            // (it is staged while it arrives) does not fill an ordinary disk.
            max_object_size: 64 << 30,
            max_push_size: 8 << 30,
            max_concurrent_uploads: 8,
            shard_xorb_wait: Duration::from_secs(30),
            max_waiting_shards: 256,
            fsync: true,
            shutdown_grace: Duration::from_secs(60),
            hook_program: None,
            limits: crate::listen::Limits::default(),
            tls: None,
            trusted_proxies: Default::default(),
            git_dir: None,
            no_git: false,
            metrics_listen: None,
            max_locks_per_repo: 100_000,
            oidc: None,
        }
    }

    pub fn repos_dir(&self) -> PathBuf {
        match &self.git_dir {
            Some(dir) => dir.clone(),
            None => self.data_dir.join("repos"),
        }
    }

    pub fn tmp_dir(&self) -> PathBuf {
        self.data_dir.join("tmp")
    }
}
