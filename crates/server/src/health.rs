//! Liveness and readiness, for load balancers and orchestrators. Both are anonymous and say
//! nothing about repositories.
//!
//! - `GET /health` (and `/healthz`): the process answers HTTP. Restarting it is the cure
//!   when it does not.
//! - `GET /readyz`: the index and the object store answer too, so requests can be served:
//!   200, or 503 with the part that does not answer. Send traffic elsewhere, do not restart.
//!
//! A readiness answer is reused for [`FRESH`] and one probe runs at a time, so that any
//! number of probes costs the index and the store at most one cheap query each per second.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use git_xet_core::MerkleHash;

use crate::state::{blocking, SharedState};
use git_xet_storage::ObjectKey;

/// How long a readiness answer is reused.
pub const FRESH: Duration = Duration::from_secs(1);
/// A part that has not answered in this time is not ready (a stopped PostgreSQL or S3
/// endpoint may hang rather than refuse).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// The last readiness answer, and the lock one probe holds while it runs.
#[derive(Debug, Default)]
pub struct Readiness {
    last: Mutex<Option<(Instant, Result<(), String>)>>,
    probing: tokio::sync::Mutex<()>,
}

impl Readiness {
    fn fresh(&self) -> Option<Result<(), String>> {
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        match &*last {
            Some((at, answer)) if at.elapsed() < FRESH => Some(answer.clone()),
            _ => None,
        }
    }

    /// `Err(reason)` while the index or the object store does not answer.
    pub async fn check(&self, state: &SharedState) -> Result<(), String> {
        if let Some(answer) = self.fresh() {
            return answer;
        }
        let _probe = self.probing.lock().await;
        // Probes that waited for the one that just ran take its answer.
        if let Some(answer) = self.fresh() {
            return answer;
        }
        let answer = probe(state).await;
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let was_ready = last.as_ref().is_none_or(|(_, a)| a.is_ok());
        match (&answer, was_ready) {
            (Err(reason), true) => tracing::warn!("not ready: {reason}"),
            (Ok(()), false) => tracing::info!("ready again"),
            _ => {}
        }
        *last = Some((Instant::now(), answer.clone()));
        answer
    }
}

/// One point query on each: a xorb that is never stored, in the index and in the store.
async fn probe(state: &SharedState) -> Result<(), String> {
    let absent = MerkleHash::default();
    let index = state.index.clone();
    let index_answer = tokio::time::timeout(
        PROBE_TIMEOUT,
        blocking(move || Ok(index.xorb(&absent)?.is_some())),
    );
    let store_answer =
        tokio::time::timeout(PROBE_TIMEOUT, state.store.len(ObjectKey::xorb(absent)));
    let (index_answer, store_answer) = tokio::join!(index_answer, store_answer);
    let mut failed = Vec::new();
    match index_answer {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => failed.push(format!("the index does not answer ({e})")),
        Err(_) => failed.push(format!(
            "the index did not answer within {}s",
            PROBE_TIMEOUT.as_secs()
        )),
    }
    match store_answer {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => failed.push(format!("the object store does not answer ({e})")),
        Err(_) => failed.push(format!(
            "the object store did not answer within {}s",
            PROBE_TIMEOUT.as_secs()
        )),
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("; "))
    }
}

/// `GET /health`, `GET /healthz`.
pub async fn live() -> &'static str {
    "ok\n"
}

/// `GET /readyz`: `ready` or 503 `not ready: REASON`, as text, never cached by a proxy.
pub async fn ready(State(state): State<SharedState>) -> Response {
    let (status, body) = match state.readiness.check(&state).await {
        Ok(()) => (StatusCode::OK, "ready\n".to_string()),
        Err(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {reason}\n"),
        ),
    };
    let mut response = (status, body).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
