//! The HTTP surface: routes, and the middleware that counts and logs every request.

use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tower::ServiceExt;

use crate::error::ServerError;
use crate::index::scope::SCOPED_CAS_PREFIX;
use crate::listen::Peer;
use crate::state::SharedState;
use crate::{cas, repo_routes, status};

pub fn router(state: SharedState) -> Router {
    let scoped = cas_routes(Router::new()).with_state(state.clone());
    cas_routes(Router::new())
        .route("/", get(status_page))
        .route("/health", get(|| async { "ok\n" }))
        .route("/metrics", get(metrics))
        // A service, not a route: a route's path captures would reach the CAS handlers.
        .nest_service(
            SCOPED_CAS_PREFIX,
            tower::service_fn(move |request: Request| {
                let cas = scoped.clone();
                async move { Ok::<_, std::convert::Infallible>(scoped_cas(cas, request).await) }
            }),
        )
        .merge(hub_routes())
        .fallback(repo_routes::dispatch)
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .with_state(state)
}

/// The CAS API under `/v1`, `/api/v1`, `/v2` and `/api/v2`.
fn cas_routes(router: Router<SharedState>) -> Router<SharedState> {
    router
        .nest("/v1", cas::router())
        .nest("/api/v1", cas::router())
        .nest("/v2", cas::router_v2())
        .nest("/api/v2", cas::router_v2())
}

/// The Hugging Face Hub API (crates/server/src/hub/): `/api/models/...`, `/api/whoami-v2`,
/// `/{ns}/{name}/resolve/...`. Kept in one block, apart from the server's own routes.
fn hub_routes() -> Router<SharedState> {
    crate::hub::router()
}

/// `/_scope/{scope}/...`: the CAS API as handed out to a dedup scope's clients (`casUrl`,
/// index/scope.rs). The segment only gives each scope its own endpoint (clients key their
/// caches by it); the token decides what a request may do, as on the plain routes.
async fn scoped_cas(cas: Router, mut request: Request) -> Response {
    // The prefix is gone (`nest_service`): `/{scope}/REST` -> `/REST`.
    let path = request.uri().path();
    let rest = path
        .strip_prefix('/')
        .and_then(|p| p.find('/').map(|i| &p[i..]))
        .unwrap_or("/");
    let rewritten = match request.uri().query() {
        Some(q) => format!("{rest}?{q}"),
        None => rest.to_string(),
    };
    match rewritten.parse() {
        Ok(uri) => *request.uri_mut() = uri,
        Err(_) => return axum::http::StatusCode::BAD_REQUEST.into_response(),
    }
    match cas.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

/// `/_scope/{scope}/REST` -> `/REST`.
fn strip_scope(path: &str) -> Option<&str> {
    let after = path.strip_prefix(SCOPED_CAS_PREFIX)?.strip_prefix('/')?;
    let slash = after.find('/')?;
    Some(&after[slash..])
}

/// `GET /metrics` on the main listener: counters say how much every tenant stores and sends,
/// so they go to clients on this host only (not through a proxy), or, with
/// `--metrics-listen`, to that listener only.
async fn metrics(
    State(state): State<SharedState>,
    peer: Option<axum::Extension<Peer>>,
) -> Response {
    if state.config.metrics_listen.is_some() {
        return ServerError::not_found("metrics are served on the --metrics-listen address")
            .into_response();
    }
    if !peer.is_some_and(|p| p.is_local()) {
        return ServerError::Forbidden(
            "/metrics answers clients on the server's host only; to scrape from elsewhere, start the server with --metrics-listen ADDR and expose that".into(),
        )
        .into_response();
    }
    metrics_text(&state)
}

/// The router of the `--metrics-listen` listener: `/metrics` to anyone who reaches it.
pub fn metrics_router(state: SharedState) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|State(state): State<SharedState>| async move { metrics_text(&state) }),
        )
        .with_state(state)
}

fn metrics_text(state: &SharedState) -> Response {
    let mut response = state.metrics.render().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    response
}

async fn status_page(State(state): State<SharedState>, headers: HeaderMap) -> Response {
    status::overview(state, headers).await
}

/// Counts each request by route and status and logs it. Only the path is logged: query
/// strings carry URL signatures and headers carry tokens.
async fn observe(State(state): State<SharedState>, request: Request, next: Next) -> Response {
    let route = route_label(request.method(), request.uri().path());
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let has_body = request.headers().contains_key(header::TRANSFER_ENCODING)
        || request
            .headers()
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0");
    let started = Instant::now();
    let mut response = next.run(request).await;
    let status = response.status();
    // A refused request's body may be left unread (a bad URL, a missing token, a size over
    // the limit); the connection cannot carry another request then, so say it will close
    // rather than let the client's next request on it fail.
    if has_body && (status.is_client_error() || status.is_server_error()) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    state.metrics.record_request(route, status.as_u16());
    let ms = started.elapsed().as_millis() as u64;
    if matches!(route, "health" | "metrics" | "xorb_data") && status.is_success() {
        tracing::debug!(%method, %path, status = status.as_u16(), ms, "request");
    } else {
        tracing::info!(%method, %path, status = status.as_u16(), ms, "request");
    }
    response
}

/// Every label [`route_label`] gives (tests check each route against this list).
pub const ROUTE_LABELS: &[&str] = &[
    "xorb_upload",
    "xorb_grant",
    "telemetry",
    "reconstruction",
    "reconstruction_v2",
    "dedup_query",
    "xorb_data",
    "shard_upload",
    "shard_upload_v2",
    "health",
    "metrics",
    "status",
    "lfs_batch",
    "lfs_verify",
    "lfs_xet_token",
    "lfs_locks",
    "lfs_upload",
    "lfs_download",
    "git_info_refs",
    "git_upload_pack",
    "git_receive_pack",
    "hook_check",
    "other",
];

/// A fixed label per route, so that metrics have bounded cardinality.
pub fn route_label(method: &Method, path: &str) -> &'static str {
    let cas = strip_scope(path).unwrap_or(path);
    let cas = cas.strip_prefix("/api").unwrap_or(cas);
    let prefixes: [(&str, &'static str); 9] = [
        ("/v1/xorbs/", "xorb_upload"),
        ("/v1/xorb-grants/", "xorb_grant"),
        ("/v1/telemetry", "telemetry"),
        ("/v1/reconstructions/", "reconstruction"),
        ("/v2/reconstructions/", "reconstruction_v2"),
        ("/v1/chunks/", "dedup_query"),
        ("/v1/xorb-data/", "xorb_data"),
        ("/v1/shards", "shard_upload"),
        ("/v2/shards", "shard_upload_v2"),
    ];
    if let Some((_, label)) = prefixes.iter().find(|(p, _)| cas.starts_with(p)) {
        return label;
    }
    if path == "/health" {
        return "health";
    }
    if path == "/metrics" {
        return "metrics";
    }
    if path == "/" {
        return "status";
    }
    if let Some(i) = path.rfind("/info/lfs/") {
        let rest = &path[i + "/info/lfs/".len()..];
        return match rest {
            "objects/batch" => "lfs_batch",
            "verify" => "lfs_verify",
            "xet-read-token" | "xet-write-token" => "lfs_xet_token",
            r if r.starts_with("locks") => "lfs_locks",
            r if r.starts_with("objects/") && method == Method::PUT => "lfs_upload",
            r if r.starts_with("objects/") => "lfs_download",
            _ => "other",
        };
    }
    if path.ends_with("/info/refs") {
        return "git_info_refs";
    }
    if path.ends_with("/git-upload-pack") {
        return "git_upload_pack";
    }
    if path.ends_with("/git-receive-pack") {
        return "git_receive_pack";
    }
    if path.ends_with("/info/xet/missing-objects") {
        return "hook_check";
    }
    if path.ends_with("/info/xet/locked-paths") {
        return "lock_check";
    }
    "other"
}
