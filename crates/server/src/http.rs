//! The HTTP surface: routes, and the middleware that counts and logs every request.

use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tower::ServiceExt;
use tracing::Instrument;

use crate::error::ServerError;
use crate::listen::Peer;
use crate::state::SharedState;
use crate::{cas, repo_routes, request_id};
use git_xet_core::api::routes::{self, Route};
use git_xet_index::scope::SCOPED_CAS_PREFIX;

pub fn router(state: SharedState) -> Router {
    let scoped = cas_routes(Router::new()).with_state(state.clone());
    cas_routes(Router::new())
        .route(routes::STATUS, get(crate::web::server_page))
        .route(routes::HEALTH, get(crate::health::live))
        .route(routes::HEALTHZ, get(crate::health::live))
        .route(routes::READYZ, get(crate::health::ready))
        .route(routes::METRICS, get(metrics))
        // A service, not a route: a route's path captures would reach the CAS handlers.
        .nest_service(
            SCOPED_CAS_PREFIX,
            tower::service_fn(move |request: Request| {
                let cas = scoped.clone();
                async move { Ok::<_, std::convert::Infallible>(scoped_cas(cas, request).await) }
            }),
        )
        .merge(hub_routes())
        .merge(crate::web::router())
        .fallback(repo_routes::dispatch)
        // A browser's session cookie authorizes its reads (web/session.rs).
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::web::session::cookie_credential,
        ))
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .with_state(state)
}

/// The CAS API at its paths (`/v1/...`, `/v2/...`) and again under `/api`.
fn cas_routes(router: Router<SharedState>) -> Router<SharedState> {
    router
        .merge(cas::router())
        .nest(routes::API_ALIAS, cas::router())
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
    metrics_text(&state).await
}

/// The router of the `--metrics-listen` listener: `/metrics` to anyone who reaches it.
pub fn metrics_router(state: SharedState) -> Router {
    Router::new()
        .route(
            routes::METRICS,
            get(|State(state): State<SharedState>| async move { metrics_text(&state).await }),
        )
        .with_state(state)
}

/// The metrics, with the storage gauges read from the index now (two aggregate queries:
/// docs/benchmarks.md has their cost).
async fn metrics_text(state: &SharedState) -> Response {
    let index = state.index.clone();
    let storage = match crate::state::blocking(move || Ok(index.stats()?)).await {
        Ok(stats) => Some(stats),
        Err(e) => {
            tracing::warn!("/metrics without the storage gauges: {e}");
            None
        }
    };
    let mut response = state.metrics.render(storage).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    response
}

/// Counts each request by route and status and logs it, in the `request` span that gives
/// every log line of the request its id (request_id.rs). Only the path is logged: query
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
    let id = request_id::of_request(request.headers());
    let span = tracing::info_span!("request", request_id = %id);
    let started = Instant::now();
    let mut response = request_id::scope(id.clone(), next.run(request))
        .instrument(span.clone())
        .await;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(request_id::HEADER, value);
    }
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
    let _in_request = span.enter();
    if matches!(route, "health" | "ready" | "metrics" | "xorb_data") && status.is_success() {
        tracing::debug!(%method, %path, status = status.as_u16(), ms, "request");
    } else {
        tracing::info!(%method, %path, status = status.as_u16(), ms, "request");
    }
    response
}

/// The label of requests no route serves.
const OTHER: &str = "other";

/// Every label [`route_label`] gives: one per route `routes` names, and [`OTHER`].
pub const ROUTE_LABELS: &[&str] = &LABELS;

const LABELS: [&str; Route::ALL.len() + 1] = {
    let mut labels = [OTHER; Route::ALL.len() + 1];
    let mut i = 0;
    while i < Route::ALL.len() {
        labels[i] = Route::ALL[i].label();
        i += 1;
    }
    labels
};

/// A fixed label per route, so that metrics have bounded cardinality. A dedup scope's CAS
/// path is labelled as the plain CAS route it reaches.
pub fn route_label(method: &Method, path: &str) -> &'static str {
    strip_scope(path)
        .and_then(Route::cas)
        .or_else(|| Route::classify(method.as_str(), path))
        .map_or(OTHER, Route::label)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::post;

    /// Each CAS route's template is registered: registering a GET and POST handler again at
    /// the same path must collide with the one there.
    #[test]
    fn the_router_serves_every_cas_route() {
        for route in Route::CAS {
            let template = route.cas_template().unwrap();
            let again = std::panic::catch_unwind(|| {
                cas::router().route(template, get(|| async {}).post(|| async {}))
            });
            assert!(again.is_err(), "{route:?} ({template}) is not registered");
        }
        // And the check can fail: a path no route serves is added without a collision.
        let fresh = std::panic::catch_unwind(|| cas::router().route("/v9/none", post(|| async {})));
        assert!(fresh.is_ok());
    }

    #[test]
    fn the_label_table_is_every_routes_label() {
        let mut expected: Vec<&str> = Route::ALL.iter().map(|r| r.label()).collect();
        expected.push(OTHER);
        assert_eq!(ROUTE_LABELS, expected.as_slice());
        let scoped = format!("{SCOPED_CAS_PREFIX}/org/v1/shards");
        assert_eq!(route_label(&Method::POST, &scoped), "shard_upload");
        assert_eq!(
            route_label(&Method::GET, "/api/v2/reconstructions/ab"),
            "reconstruction_v2"
        );
        assert_eq!(
            route_label(&Method::POST, "/o/r.git/info/xet/locked-paths"),
            "lock_check"
        );
        assert_eq!(route_label(&Method::GET, "/nothing/here"), "other");
    }
}
