//! `git xet server`: the CAS API, the git-lfs Batch API, git over smart HTTP and ssh, on
//! storage and index backends behind small traits, plus the programs' server-side commands.
//! Built on the crates below it, never on the client side: `git-xet-deployment` (where the
//! store, index and secret live, and the hosted repositories), `git-xet-hook` (the push
//! check, shared with the pre-receive hook), `git-xet-index` (what is stored and who sees
//! it), `git-xet-storage` (the objects), `git-xet-identity` (tokens, keys, signed URLs,
//! OIDC), `git-xet-web` (the pages' HTML), `git-xet-io` and `git-xet-core`. The ssh shell
//! (`git-xet-shell`) and the upkeep commands (`git-xet-upkeep`) are beside it, not on it:
//! the shell reaches the server over HTTP, upkeep works on the deployment directly.
//!
//! | module          | job                                                               |
//! |-----------------|-------------------------------------------------------------------|
//! | `config`        | settings                                                          |
//! | `shard_check`   | validating uploaded shards against stored xorbs                   |
//! | `reconstruct`   | planning reconstructions for byte ranges                          |
//! | `cas`           | CAS API handlers                                                  |
//! | `lfs`           | git-lfs Batch API, basic transfers, verify, locks, token refresh  |
//! | `ingest`        | converting basic uploads to xorbs + shard (server-side dedup)     |
//! | `import_lfs`    | `import-lfs`: a whole LFS object store into a repository, offline |
//! | `file_stream`   | streaming a reconstruction as plain bytes (basic downloads)       |
//! | `git`           | git smart HTTP (upload/receive-pack), the hook check's route      |
//! | `repo_routes`   | routes under a repository path: LFS, git, hook check              |
//! | `http`, `metrics` | router, request accounting, Prometheus text                     |
//! | `listen`        | connections: per-address cap, header and inactivity timeouts      |
//! | `status`        | what a repository's storage tab gathers: LFS files at HEAD, pushes, locks |
//! | `web`           | the web pages' routes (`/`, `/ORG/REPO/...`, sign-in); pages from git-xet-web |
//! | `tls`, `proxy`  | native HTTPS; trusted reverse proxies' forwarding headers         |

pub mod body;
pub(crate) mod cas;

pub(crate) mod config;
pub(crate) mod error;
pub(crate) mod file_stream;
pub(crate) mod git;
pub(crate) mod health;
pub mod http;
pub(crate) mod hub;
pub mod import_lfs;
pub(crate) mod ingest;
pub mod lfs;
pub mod listen;
pub(crate) mod metrics;
pub mod proxy;
pub(crate) mod reconstruct;
pub(crate) mod repo_routes;
pub(crate) mod request_id;
pub(crate) mod shard_check;
pub(crate) mod state;
pub(crate) mod status;
pub mod tls;
pub(crate) mod web;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

pub use config::ServerConfig;

use crate::metrics::Metrics;
use crate::state::AppState;

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Index(#[from] git_xet_index::IndexError),
    #[error(transparent)]
    Deployment(#[from] git_xet_deployment::DeploymentError),
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("data directory {} is in use by another git xet server{}: stop it, or give this one another --data", .data.display(), .pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    DataDirInUse {
        data: std::path::PathBuf,
        pid: Option<u32>,
    },
}

fn io_context(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> StartError {
    let context = context.into();
    move |source| StartError::Io { context, source }
}

/// Removes what an interrupted write left in `tmp/`: none of it was ever visible.
fn clean_tmp(tmp: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(tmp)?;
    for entry in std::fs::read_dir(tmp)? {
        let path = entry?.path();
        let _ = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
    }
    Ok(())
}

/// Takes the data directory's lock (`DATA/server.lock`, held for the process's life) and
/// writes this process's id in it: a second server on the same directory would share its
/// SQLite index unsafely and its start-up cleanup would delete this one's staging files.
/// Admin commands (`gc`, `check`, `token`) do not take it.
fn lock_data_dir(data: &Path) -> Result<std::fs::File, StartError> {
    use git_xet_io::platform::file::{lock, Lock};
    use std::io::{Read, Seek, Write};
    let path = data.join("server.lock");
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io_context(format!("opening {}", path.display())))?;
    match lock(&file, Lock::ExclusiveNow) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            return Err(StartError::DataDirInUse {
                data: data.to_path_buf(),
                pid: text.trim().parse().ok(),
            });
        }
        Err(e) => return Err(io_context(format!("locking {}", path.display()))(e)),
    }
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| writeln!(file, "{}", std::process::id()))
        .map_err(io_context(format!("writing {}", path.display())))?;
    Ok(file)
}

/// Opens the data directory and builds the shared state. `internal` is the address of the
/// plain loopback listener for hooks when it is not `bound` (TLS).
fn open_state(
    config: ServerConfig,
    bound: SocketAddr,
    internal: SocketAddr,
) -> Result<AppState, StartError> {
    let data = &config.data_dir;
    std::fs::create_dir_all(data).map_err(io_context(format!(
        "creating data directory {}",
        data.display()
    )))?;
    let data_lock = lock_data_dir(data)?;
    clean_tmp(&config.tmp_dir()).map_err(io_context("cleaning the temporary directory"))?;
    let git_xet_deployment::Deployment { store, index, keys } =
        git_xet_deployment::open(&config.deployment, &config.tmp_dir(), config.fsync)?;
    let scheme = if config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let listen_url = loopback_url(scheme, bound);
    let internal_url = loopback_url("http", internal);
    let max_uploads = config.max_concurrent_uploads.max(1);
    let max_waiting = config.max_waiting_shards;
    Ok(AppState {
        config,
        store,
        index,
        keys,
        metrics: Metrics::default(),
        upload_slots: tokio::sync::Semaphore::new(max_uploads),
        conversion_slots: tokio::sync::Semaphore::new(max_uploads),
        xorb_waits: crate::cas::xorb_waits::XorbWaits::new(max_waiting),
        upload_batches: Default::default(),
        internal_url,
        listen_url,
        data_lock: Some(data_lock),
        revocations: git_xet_identity::revocation::RevocationCache::new(
            git_xet_identity::revocation::DEFAULT_TTL,
        ),
        readiness: Default::default(),
    })
}

/// The loopback URL of a listener.
fn loopback_url(scheme: &str, bound: SocketAddr) -> String {
    let ip = match bound.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => std::net::IpAddr::from([127, 0, 0, 1]),
        ip if ip.is_unspecified() => std::net::IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("{scheme}://{}", SocketAddr::new(ip, bound.port()))
}

/// Runs the server until SIGINT or SIGTERM, then lets in-flight requests finish (up to the
/// configured grace period).
pub async fn run(config: ServerConfig) -> Result<(), StartError> {
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(io_context(format!("binding {}", config.listen)))?;
    let bound = listener
        .local_addr()
        .map_err(io_context("reading the bound address"))?;
    let tls = config
        .tls
        .as_ref()
        .map(tls::TlsFiles::acceptor)
        .transpose()?;
    // With TLS, the hooks reach the server on a plain listener of their own on loopback.
    let internal = match tls {
        None => None,
        Some(_) => Some(
            tokio::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
                .await
                .map_err(io_context("binding the loopback listener for hooks"))?,
        ),
    };
    let internal_bound = match &internal {
        Some(l) => l
            .local_addr()
            .map_err(io_context("reading the bound address"))?,
        None => bound,
    };
    let ready_file = config.ready_file.clone();
    let grace = config.shutdown_grace;
    let state = Arc::new(tokio::task::block_in_place(|| {
        open_state(config, bound, internal_bound)
    })?);
    let base = state
        .config
        .public_url
        .clone()
        .unwrap_or_else(|| state.listen_url.clone());
    tracing::info!(url = %base, data = %state.config.data_dir.display(), "git xet server listening");
    if std::process::Command::new("git")
        .arg("--version")
        .output()
        .is_err()
    {
        tracing::warn!("git is not on PATH: git over HTTP will answer 500 until it is installed");
    }
    // `git xet shell` finds the running server through this file.
    let urls = git_xet_deployment::running::ServerUrls {
        internal_url: state.internal_url.clone(),
        public_url: state.config.public_url.clone(),
        repos_dir: Some(state.config.repos_dir()),
    };
    git_xet_deployment::running::write(&state.config.data_dir, &urls)
        .map_err(io_context("writing the server's URLs for git xet shell"))?;
    if let Some(path) = ready_file {
        git_xet_deployment::write_atomically(&path, &base)
            .map_err(io_context(format!("writing ready file {}", path.display())))?;
    }

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down: finishing in-flight requests");
        let _ = stop_tx.send(true);
    });
    let limits = state.config.limits;
    let front = listen::Front {
        tls,
        trusted: Arc::new(state.config.trusted_proxies.clone()),
    };
    let metrics = match state.config.metrics_listen {
        None => None,
        Some(addr) => {
            let l = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(io_context(format!("binding the metrics listener {addr}")))?;
            let at = l
                .local_addr()
                .map_err(io_context("reading the bound address"))?;
            tracing::info!(url = %loopback_url("http", at), "metrics listening");
            let router = http::metrics_router(state.clone());
            let serve = listen::serve(l, router, limits, Default::default(), stop_rx.clone());
            Some(tokio::spawn(serve))
        }
    };
    let router = http::router(state);
    let hooks = internal.map(|l| {
        let serve = listen::serve(
            l,
            router.clone(),
            limits,
            Default::default(),
            stop_rx.clone(),
        );
        tokio::spawn(serve)
    });
    let serve = listen::serve(listener, router, limits, front, stop_rx.clone());
    let mut deadline_rx = stop_rx;
    let deadline = async move {
        let _ = deadline_rx.wait_for(|stop| *stop).await;
        tokio::time::sleep(grace).await;
    };
    tokio::select! {
        result = serve => result.map_err(io_context("serving"))?,
        _ = deadline => tracing::warn!("shutdown grace period over; exiting with requests in flight"),
    }
    for task in hooks.into_iter().chain(metrics) {
        task.abort();
    }
    tracing::info!("stopped");
    Ok(())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("cannot listen for SIGTERM: {e}");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
