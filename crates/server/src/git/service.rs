//! git's smart HTTP protocol, served by running `git upload-pack` / `git receive-pack` in
//! stateless-RPC mode: the request body streams to the service's stdin, its stdout streams
//! back as the response, so a push or clone of any size passes through in bounded memory.
//!
//! This is what `git http-backend` does for these routes, without its two extra process
//! starts per request (the backend, then `git` to start the service): about 4.5 ms of the
//! 6.3 ms an advertisement took, and a push makes four such requests. The rules follow
//! http-backend: the `# service=` banner except for protocol v2, gzip request bodies
//! inflated, the committer named after the authenticated user for receive-pack's reflog.

use std::path::Path;
use std::process::Stdio;

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use gix_packetline::blocking_io::encode;
use http_body_util::BodyExt;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use crate::error::{ServerError, ServerResult};
use git_xet_deployment::{repos, writers};

/// The two services.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    UploadPack,
    ReceivePack,
}

impl Service {
    pub fn from_name(name: &str) -> Option<Service> {
        match name {
            "git-upload-pack" => Some(Service::UploadPack),
            "git-receive-pack" => Some(Service::ReceivePack),
            _ => None,
        }
    }

    /// `git-upload-pack` / `git-receive-pack`, as the protocol names them.
    fn name(self) -> &'static str {
        match self {
            Service::UploadPack => "git-upload-pack",
            Service::ReceivePack => "git-receive-pack",
        }
    }

    /// The git subcommand.
    fn command(self) -> &'static str {
        &self.name()["git-".len()..]
    }
}

/// One service run for one request.
pub struct ServiceRequest<'a> {
    pub repo_dir: &'a Path,
    pub service: Service,
    /// The ref advertisement (`GET info/refs`) rather than an RPC (`POST`).
    pub advertisement: bool,
    pub headers: HeaderMap,
    pub body: Body,
    /// Largest request body passed on (after inflating).
    pub max_body: u64,
    /// Who pushes, for the reflog; `None` for anonymous access.
    pub user: Option<String>,
    /// Extra environment (for hooks), besides PATH and HOME.
    pub env: Vec<(String, String)>,
    pub home: &'a Path,
    /// For a push: the repository's writer lock, which git inherits (git_xet_deployment::writers).
    pub writer: Option<writers::WriterLock>,
}

fn header_str(headers: &HeaderMap, name: impl header::AsHeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// `Git-Protocol` as the service may see it (`GIT_PROTOCOL`): printable ASCII only.
fn git_protocol(headers: &HeaderMap) -> Option<&str> {
    header_str(headers, "git-protocol").filter(|v| v.bytes().all(|b| b.is_ascii_graphic()))
}

/// Whether the client asked for protocol v2, the way git's servers read `GIT_PROTOCOL`
/// (colon-separated `key=value` items).
fn wants_v2(protocol: Option<&str>) -> bool {
    protocol.is_some_and(|p| p.split(':').any(|item| item == "version=2"))
}

/// The banner of a v0/v1 advertisement: `# service=NAME` as a pkt-line (gix-packetline's
/// encoder), then a flush.
fn service_banner(service: Service) -> std::io::Result<bytes::Bytes> {
    let mut out = Vec::with_capacity(64);
    encode::text_to_write(format!("# service={}", service.name()).as_bytes(), &mut out)?;
    encode::flush_to_write(&mut out)?;
    Ok(out.into())
}

/// Runs the service; `on_exit` runs after it has exited and before the response body ends,
/// even when the client has gone away.
pub async fn run<F>(request: ServiceRequest<'_>, on_exit: F) -> ServerResult<Response>
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let service = request.service;
    let headers = &request.headers;
    let gzipped = matches!(
        header_str(headers, header::CONTENT_ENCODING),
        Some("gzip" | "x-gzip")
    );
    let protocol = git_protocol(headers);
    let user = request.user.as_deref().unwrap_or("anonymous");
    // v0/v1 advertisements start with a banner naming the service; v2's does not.
    let banner = if request.advertisement && !wants_v2(protocol) {
        Some(service_banner(service).map_err(|e| {
            ServerError::internal(format!("framing the {} banner: {e}", service.name()))
        })?)
    } else {
        None
    };
    let mut cmd = Command::new(git_program());
    // Bare repositories keep no reflog by default; the status page lists recent pushes
    // from it.
    cmd.args(["-c", "core.logAllRefUpdates=always"])
        .args(repos::FSYNC_CONFIG)
        .arg(service.command())
        .arg("--stateless-rpc")
        .args(request.advertisement.then_some("--advertise-refs"))
        .arg(".")
        .current_dir(request.repo_dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", request.home)
        .env("GIT_COMMITTER_NAME", user)
        .env("GIT_COMMITTER_EMAIL", format!("{user}@http.127.0.0.1"))
        .stdin(if request.advertisement {
            Stdio::null()
        } else {
            Stdio::piped()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(p) = protocol {
        cmd.env("GIT_PROTOCOL", p);
    }
    for (k, v) in &request.env {
        cmd.env(k, v);
    }
    if let Some(writer) = &request.writer {
        // SAFETY: keep_open only calls fcntl, which is async-signal-safe.
        unsafe { cmd.pre_exec(writers::keep_open(writer.fd())) };
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| ServerError::internal(format!("starting git {}: {e}", service.command())))?;

    if let Some(stdin) = child.stdin.take() {
        tokio::spawn(feed(request.body, stdin, gzipped, request.max_body));
    }
    let stderr = child.stderr.take().expect("piped stderr");
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::warn!("git {}: {line}", service.command());
        }
    });

    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(relay(child, stdout, tx, service, request.writer, on_exit));
    let head = futures::stream::iter(banner.map(Ok::<_, std::io::Error>));
    let chunks = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (Ok(chunk), rx))
    });
    let body = head.chain(chunks);
    let mut response = Body::from_stream(body).into_response();
    let content_type = if request.advertisement {
        format!("application/x-{}-advertisement", service.name())
    } else {
        format!("application/x-{}-result", service.name())
    };
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_str(&content_type).expect("ascii"),
    );
    // As http-backend: ref advertisements and results must never be cached.
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, max-age=0, must-revalidate"),
    );
    h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    h.insert(
        header::EXPIRES,
        HeaderValue::from_static("Fri, 01 Jan 1980 00:00:00 GMT"),
    );
    Ok(response)
}

/// Passes git's stdout on to the response and waits for git; owns both, so that a client
/// that goes away never takes git down with it. receive-pack then runs to its end (its
/// stdin closed by [`feed`], its output read and dropped: no SIGPIPE, no SIGKILL in the
/// middle of a ref transaction, which would leave `*.lock` files that block every later
/// push); upload-pack, which writes nothing, sees its output pipe closed and stops.
/// `on_exit` runs after git has exited and before the last chunk is sent, so that the
/// client sees the push done only once it is.
async fn relay<F>(
    mut child: tokio::process::Child,
    mut stdout: tokio::process::ChildStdout,
    tx: tokio::sync::mpsc::Sender<bytes::Bytes>,
    service: Service,
    writer: Option<writers::WriterLock>,
    on_exit: F,
) where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    use tokio::io::AsyncReadExt;
    let mut held: Option<bytes::Bytes> = None;
    let mut client_gone = false;
    let mut buf = bytes::BytesMut::with_capacity(64 * 1024);
    loop {
        buf.reserve(64 * 1024);
        match stdout.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let chunk = buf.split().freeze();
        if client_gone {
            continue;
        }
        if let Some(previous) = held.replace(chunk) {
            if tx.send(previous).await.is_err() {
                client_gone = true;
                held = None;
                if service == Service::UploadPack {
                    break;
                }
            }
        }
    }
    drop(stdout);
    if client_gone {
        tracing::warn!(
            "git {}: the client went away; letting git finish",
            service.command()
        );
    }
    match child.wait().await {
        Ok(status) if !status.success() => {
            tracing::warn!("git {} exited with {status}", service.command())
        }
        Err(e) => tracing::warn!("waiting for git {}: {e}", service.command()),
        Ok(_) => {}
    }
    on_exit.await;
    drop(writer);
    if let Some(last) = held {
        let _ = tx.send(last).await;
    }
}

/// Copies the request body into the service's stdin, then closes it so the service sees
/// the end. A body cut short (too large, bad gzip) reaches the service cut short: it fails
/// on it, as with `git http-backend`.
async fn feed(body: Body, mut stdin: tokio::process::ChildStdin, gzipped: bool, max_body: u64) {
    if let Err(why) = copy_body(body, &mut stdin, gzipped, max_body).await {
        tracing::warn!("git request body: {why}");
    }
    let _ = stdin.shutdown().await;
}

/// Why a request body did not reach the service whole (logged; the service fails on it).
#[derive(Debug, thiserror::Error)]
enum BodyError {
    #[error("over {0} bytes; cut off")]
    TooLarge(u64),
    #[error("git stopped reading it: {0}")]
    GitStopped(std::io::Error),
    #[error("the client stopped sending it")]
    ClientStopped,
    #[error("not valid gzip: {0}")]
    Gzip(std::io::Error),
    #[error("ends inside its gzip stream: {0}")]
    GzipCut(std::io::Error),
}

/// Compressed bytes inflated at once: at most about a megabyte comes out of them.
const INFLATE_STEP: usize = 1024;

/// The body, inflated when gzipped, at most `max_body` bytes of it.
async fn copy_body(
    mut body: Body,
    stdin: &mut tokio::process::ChildStdin,
    gzipped: bool,
    max_body: u64,
) -> Result<(), BodyError> {
    use std::io::Write;
    let mut inflater = gzipped.then(|| flate2::write::GzDecoder::new(Vec::new()));
    let mut sent = 0u64;
    let mut send = async |plain: &[u8]| {
        sent += plain.len() as u64;
        if sent > max_body {
            return Err(BodyError::TooLarge(max_body));
        }
        stdin.write_all(plain).await.map_err(BodyError::GitStopped)
    };
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return Err(BodyError::ClientStopped);
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        match inflater.as_mut() {
            None => send(&data).await?,
            Some(inflater) => {
                // A little input at a time: deflate inflates up to ~1000-fold, so a whole
                // frame could inflate to hundreds of megabytes before the size check.
                for piece in data.chunks(INFLATE_STEP) {
                    inflater.write_all(piece).map_err(BodyError::Gzip)?;
                    send(&std::mem::take(inflater.get_mut())).await?;
                }
            }
        }
    }
    if let Some(inflater) = inflater {
        let rest = inflater.finish().map_err(BodyError::GzipCut)?;
        send(&rest).await?;
    }
    Ok(())
}

/// git's absolute path, found once on PATH. A child given its own PATH by a program named
/// without a path makes std fork the whole server (posix_spawn cannot search the child's
/// PATH); with a path it uses posix_spawn, which copies no page tables. Four spawns a push.
fn git_program() -> &'static std::path::Path {
    static GIT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    GIT.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt;
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .map(|dir| dir.join("git"))
            .find(|p| {
                p.metadata()
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
            .unwrap_or_else(|| "git".into())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_are_named_as_the_protocol_names_them() {
        assert_eq!(
            Service::from_name("git-upload-pack"),
            Some(Service::UploadPack)
        );
        assert_eq!(
            Service::from_name("git-receive-pack"),
            Some(Service::ReceivePack)
        );
        assert_eq!(Service::from_name("git-upload-archive"), None);
        assert_eq!(Service::ReceivePack.command(), "receive-pack");
    }

    #[test]
    fn only_version_2_drops_the_banner() {
        assert!(wants_v2(Some("version=2")));
        assert!(wants_v2(Some("object-format=sha1:version=2")));
        assert!(!wants_v2(Some("version=1")));
        assert!(!wants_v2(Some("version=20")));
        assert!(!wants_v2(None));
    }

    #[test]
    fn the_banner_is_one_pkt_line_and_a_flush() {
        assert_eq!(
            &service_banner(Service::UploadPack).unwrap()[..],
            b"001e# service=git-upload-pack\n0000"
        );
        assert_eq!(
            &service_banner(Service::ReceivePack).unwrap()[..],
            b"001f# service=git-receive-pack\n0000"
        );
    }
}
