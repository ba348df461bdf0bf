//! `POST /v2/shards`: the shard upload hf-xet 1.8 tries first. The same validation and
//! registration as `POST /v1/shards`; the answer is an NDJSON stream of progress frames
//! ending in `{"type":"result"}` (docs/protocol.md, "The deployed ecosystem").
//!
//! The reference CAS streams frames while it validates and reports failures after the
//! stream started as `{"type":"error",...}` frames. Here validation is done before the answer
//! starts (milliseconds for a shard of a few files, seconds at the limits of shard_check.rs),
//! so a refused shard gets the same HTTP status as on v1, which the client treats as a failed
//! upload without falling back (it falls back to v1 on 404/501 only).

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use git_xet_core::api::cas::{CommitStage, ShardUploadFrame as Frame};

use crate::cas::shards::receive;
use crate::error::ServerResult;
use crate::state::SharedState;

pub async fn upload(
    State(state): State<SharedState>,
    headers: HeaderMap,
    body: Body,
) -> ServerResult<Response> {
    let (_, files) = receive(&state, &headers, body).await?;
    let files = files.max(1) as u64;
    let frames = [
        Frame::Validating {
            verified: 0,
            total: files,
        },
        Frame::Validating {
            verified: files,
            total: files,
        },
        Frame::Committing {
            stage: CommitStage::Uploading,
        },
        Frame::Committing {
            stage: CommitStage::Syncing,
        },
        Frame::Result,
    ];
    Ok((
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-ndjson"),
        )],
        ndjson(&frames),
    )
        .into_response())
}

/// Frames as newline-delimited JSON.
fn ndjson(frames: &[Frame]) -> Vec<u8> {
    let mut body = Vec::new();
    for frame in frames {
        // Plain enums of numbers and fixed strings: serializing cannot fail.
        serde_json::to_writer(&mut body, frame).expect("a frame serializes");
        body.push(b'\n');
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_what_the_reference_client_parses() {
        let body = ndjson(&[
            Frame::Validating {
                verified: 1,
                total: 2,
            },
            Frame::Committing {
                stage: CommitStage::Syncing,
            },
            Frame::Result,
        ]);
        assert_eq!(
            String::from_utf8(body).unwrap(),
            "{\"type\":\"validating\",\"verified\":1,\"total\":2}\n\
             {\"type\":\"committing\",\"stage\":\"syncing\"}\n\
             {\"type\":\"result\"}\n"
        );
    }
}
