//! `GET /v1/upload-batches/{session}`: the objects an upload Batch API answer gave `xet`
//! actions, by the session id of that answer (a git-xet extension: docs/server-api.md,
//! "Read-ahead of a push's objects").
//!
//! git-lfs hands its agents one object each and waits for each answer before the next, so
//! a push of many small files takes one registration round trip per object an agent holds.
//! With the answer's list, the agent coordinating the push packs the objects git-lfs has
//! not handed over yet from its own object store and registers them ahead, so that when
//! git-lfs hands one over, its answer is already there.
//!
//! The list is what the client itself sent in its Batch API request, kept in memory for a
//! short while (bounded: the oldest answers go first) and given only to a CAS token of the
//! same repository: another repository's token gets 404, as for an unknown session. A
//! server that lost the list (restarted, another instance behind a balancer) answers 404
//! too, and the client simply does not read ahead.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::Json;

use crate::error::{ServerError, ServerResult};
use crate::state::SharedState;
use git_xet_core::api::cas::{AnnouncedObject, UploadBatchAnswer};
use git_xet_identity::auth::Scope;
use git_xet_index::RepoName;

/// Answers kept at most...
const MAX_KEPT: usize = 1024;
/// ...and for at most this long: a push asks within a round trip of its Batch API answer.
const KEPT_FOR: Duration = Duration::from_secs(600);
/// Objects of one answer kept at most (git-lfs asks for 100 at a time): with [`MAX_KEPT`],
/// at most about 20 MiB whatever clients send.
const MAX_OBJECTS: usize = 200;

struct Kept {
    repo: RepoName,
    objects: Vec<AnnouncedObject>,
    at: Instant,
}

/// The recent upload Batch API answers' objects, by session id.
#[derive(Default)]
pub struct UploadBatches {
    inner: Mutex<(HashMap<String, Kept>, VecDeque<String>)>,
}

impl UploadBatches {
    /// Keeps `objects` (those given `xet` upload actions) of the answer `session` to `repo`.
    pub fn remember(&self, session: &str, repo: &RepoName, mut objects: Vec<AnnouncedObject>) {
        if objects.is_empty() {
            return;
        }
        objects.truncate(MAX_OBJECTS);
        let mut guard = self.inner.lock().expect("upload batches lock");
        let (kept, order) = &mut *guard;
        while kept.len() >= MAX_KEPT {
            let Some(oldest) = order.pop_front() else {
                break;
            };
            kept.remove(&oldest);
        }
        let entry = Kept {
            repo: repo.clone(),
            objects,
            at: Instant::now(),
        };
        if kept.insert(session.to_string(), entry).is_none() {
            order.push_back(session.to_string());
        }
    }

    /// The objects of `session`, when it was an answer to `repo` and is still kept.
    fn objects(&self, session: &str, repo: &RepoName) -> Option<Vec<AnnouncedObject>> {
        let guard = self.inner.lock().expect("upload batches lock");
        let kept = guard.0.get(session)?;
        (kept.repo == *repo && kept.at.elapsed() < KEPT_FOR).then(|| kept.objects.clone())
    }
}

pub async fn get(
    State(state): State<SharedState>,
    Path(session): Path<String>,
    headers: axum::http::HeaderMap,
) -> ServerResult<Json<UploadBatchAnswer>> {
    // Write scope: only a client that may upload to the repository reads ahead for it.
    let access = state.authorize_cas(&headers, Scope::Write)?;
    match state.upload_batches.objects(&session, &access.repo) {
        Some(objects) => Ok(Json(UploadBatchAnswer { objects })),
        None => Err(ServerError::not_found(format!(
            "no upload batch {session:?} of {} is kept here",
            access.repo
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(n: u8) -> AnnouncedObject {
        AnnouncedObject {
            oid: format!("{n:02x}").repeat(32),
            size: u64::from(n),
        }
    }

    #[test]
    fn answers_are_kept_per_repository_and_the_oldest_go_first() {
        let batches = UploadBatches::default();
        let a = RepoName::parse("org/a").unwrap();
        let b = RepoName::parse("org/b").unwrap();
        batches.remember("s1", &a, vec![object(1), object(2)]);
        assert_eq!(batches.objects("s1", &a), Some(vec![object(1), object(2)]));
        // Another repository's token does not see it; nor does anyone an unknown session.
        assert_eq!(batches.objects("s1", &b), None);
        assert_eq!(batches.objects("s2", &a), None);
        // Nothing to read ahead: nothing kept.
        batches.remember("empty", &a, Vec::new());
        assert_eq!(batches.objects("empty", &a), None);
        for i in 0..MAX_KEPT {
            batches.remember(&format!("later{i}"), &a, vec![object(3)]);
        }
        assert_eq!(batches.objects("s1", &a), None, "the oldest went first");
        assert_eq!(batches.objects("later0", &a), Some(vec![object(3)]));
        assert!(batches.inner.lock().unwrap().0.len() <= MAX_KEPT);
        // One answer keeps at most MAX_OBJECTS.
        batches.remember("big", &a, vec![object(4); MAX_OBJECTS + 5]);
        assert_eq!(batches.objects("big", &a).unwrap().len(), MAX_OBJECTS);
    }
}
