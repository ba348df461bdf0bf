//! `POST /v1/telemetry`: hf-xet 1.8 reports a summary after its transfers. Counted, then
//! dropped unread: its content is the client's business, never logged or stored.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;

use crate::metrics::add;
use crate::state::SharedState;

/// The body is taken (axum's default limit of 2 MiB applies) so that the connection can
/// carry the next request, and then dropped.
pub async fn report(State(state): State<SharedState>, _body: Bytes) -> StatusCode {
    add(&state.metrics.telemetry_reports, 1);
    StatusCode::NO_CONTENT
}
