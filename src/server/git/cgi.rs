//! Running `git http-backend` as a CGI program over tokio::process, streaming the request
//! body to its stdin and its stdout back as the response, so a push or clone of any size
//! passes through with bounded memory.

use std::path::Path;
use std::process::Stdio;

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http_body_util::BodyExt;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use crate::server::error::{ServerError, ServerResult};

/// Largest CGI header block accepted from the backend.
const MAX_CGI_HEADERS: usize = 64 * 1024;

/// One CGI invocation.
pub struct CgiRequest<'a> {
    pub project_root: &'a Path,
    pub path_info: String,
    pub method: String,
    pub query: String,
    pub headers: HeaderMap,
    pub body: Body,
    /// Largest request body passed on.
    pub max_body: u64,
    /// Set for pushes: `git http-backend` enables receive-pack for authenticated users.
    pub remote_user: Option<String>,
    /// Extra environment (for hooks), besides PATH and HOME.
    pub env: Vec<(String, String)>,
    pub home: &'a Path,
}

fn header_str(headers: &HeaderMap, name: impl header::AsHeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Runs the backend; `on_exit` runs after it has exited and before the response body ends.
pub async fn run<F>(request: CgiRequest<'_>, on_exit: F) -> ServerResult<Response>
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let mut cmd = Command::new("git");
    cmd.arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", request.home)
        .env("GIT_PROJECT_ROOT", request.project_root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("PATH_INFO", &request.path_info)
        .env("REQUEST_METHOD", &request.method)
        .env("QUERY_STRING", &request.query)
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let h = &request.headers;
    if let Some(v) = header_str(h, header::CONTENT_TYPE) {
        cmd.env("CONTENT_TYPE", v);
    }
    if let Some(v) = header_str(h, header::CONTENT_LENGTH) {
        cmd.env("CONTENT_LENGTH", v);
    }
    if let Some(v) = header_str(h, header::CONTENT_ENCODING) {
        cmd.env("HTTP_CONTENT_ENCODING", v);
    }
    if let Some(v) =
        header_str(h, "git-protocol").filter(|v| v.bytes().all(|b| b.is_ascii_graphic()))
    {
        cmd.env("GIT_PROTOCOL", v);
    }
    if let Some(user) = &request.remote_user {
        cmd.env("REMOTE_USER", user);
    }
    for (k, v) in &request.env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| ServerError::internal(format!("starting git http-backend: {e}")))?;

    let mut stdin = child.stdin.take().expect("piped stdin");
    let mut body = request.body;
    let max_body = request.max_body;
    tokio::spawn(async move {
        let mut sent = 0u64;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { break };
            if let Ok(data) = frame.into_data() {
                sent += data.len() as u64;
                if sent > max_body {
                    tracing::warn!("git request body over {max_body} bytes; cutting it off");
                    break;
                }
                if stdin.write_all(&data).await.is_err() {
                    break;
                }
            }
        }
        let _ = stdin.shutdown().await;
    });
    let stderr = child.stderr.take().expect("piped stderr");
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::warn!("git http-backend: {line}");
        }
    });

    let mut stdout =
        BufReader::with_capacity(64 * 1024, child.stdout.take().expect("piped stdout"));
    let (status, headers) = read_cgi_headers(&mut stdout).await?;
    let tail = futures::stream::once(async move {
        let _ = child.wait().await;
        on_exit.await;
    })
    .filter_map(|()| futures::future::ready(None::<std::io::Result<bytes::Bytes>>));
    let stream = tokio_util::io::ReaderStream::with_capacity(stdout, 64 * 1024).chain(tail);
    let mut response = Body::from_stream(stream).into_response();
    *response.status_mut() = status;
    response.headers_mut().extend(headers);
    Ok(response)
}

/// Reads the CGI header block: `Status:` and response headers, up to the blank line.
async fn read_cgi_headers<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
) -> ServerResult<(StatusCode, HeaderMap)> {
    let mut status = StatusCode::OK;
    let mut headers = HeaderMap::new();
    let mut total = 0usize;
    loop {
        let mut line = String::new();
        let n = reader.read_line(&mut line).await?;
        total += n;
        if n == 0 || total > MAX_CGI_HEADERS {
            return Err(ServerError::internal(
                "git http-backend ended before its headers",
            ));
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            return Ok((status, headers));
        }
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code = value
                .split_whitespace()
                .next()
                .and_then(|c| c.parse::<u16>().ok());
            status = code
                .and_then(|c| StatusCode::from_u16(c).ok())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        } else if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.trim().as_bytes()),
            HeaderValue::from_str(value),
        ) {
            headers.append(n, v);
        }
    }
}
