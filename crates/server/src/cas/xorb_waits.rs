//! Shards that arrive before their xorbs (a git-xet extension of the CAS API, docs/server-api.md,
//! "Pipelined shard uploads"): a client that sends a shard while the xorbs it describes are
//! still being uploaded names them in [`AWAIT_XORBS`]; the shard, staged, then waits for each
//! to be stored in the uploader's dedup domain before it is validated as usual. It waits
//! without an upload slot (the xorbs it waits for need them), woken when this process stores a
//! xorb and by a slow poll for xorbs another server instance stored, for at most the server's
//! bound. Whatever happens meanwhile, validation decides: a xorb not there by then is the
//! usual missing-xorb refusal, and the same wait and answer whether another scope holds the
//! xorb or nobody does. Past the bound on waiting shards, or past one repository's share of
//! it (so that one repository's clients cannot take every place), a shard is validated at once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use tokio::sync::{Notify, Semaphore};

use crate::error::{ServerError, ServerResult};
use crate::state::{blocking, SharedState};
use git_xet_core::MerkleHash;
use git_xet_index::RepoName;
use git_xet_index::{DedupDomain, Index};

pub use git_xet_core::api::cas::{AWAIT_XORBS, AWAIT_XORBS_LIMIT};
/// Xorbs one shard may name (the client's small-file rounds send one or two).
pub const MAX_AWAITED: usize = 16;
/// How often a waiting shard looks for xorbs another server instance stored.
const POLL: Duration = Duration::from_millis(250);
/// One repository's share of the waiting places: an eighth (at least one). A push sends one
/// shard at a time per remote, so this is several pushes at once.
const REPO_SHARE: usize = 8;

/// What waiting shards share: the wake-up of stored xorbs and the bound on waiters.
pub struct XorbWaits {
    stored: Notify,
    waiters: Semaphore,
    /// Shards waiting now, per repository (entries removed at zero).
    per_repo: Mutex<HashMap<RepoName, usize>>,
    per_repo_max: usize,
}

/// A repository's waiting place, given back when dropped.
struct RepoPlace<'a> {
    waits: &'a XorbWaits,
    repo: RepoName,
}

impl Drop for RepoPlace<'_> {
    fn drop(&mut self) {
        let mut map = self.waits.per_repo.lock().expect("waiters lock");
        if let Some(n) = map.get_mut(&self.repo) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.repo);
            }
        }
    }
}

impl XorbWaits {
    pub fn new(max_waiting: usize) -> XorbWaits {
        XorbWaits {
            stored: Notify::new(),
            waiters: Semaphore::new(max_waiting),
            per_repo: Mutex::new(HashMap::new()),
            per_repo_max: (max_waiting / REPO_SHARE).max(1),
        }
    }

    /// A waiting place for `repo`, if it has not used its share.
    fn repo_place(&self, repo: &RepoName) -> Option<RepoPlace<'_>> {
        let mut map = self.per_repo.lock().expect("waiters lock");
        let n = map.entry(repo.clone()).or_insert(0);
        if *n >= self.per_repo_max {
            return None;
        }
        *n += 1;
        Some(RepoPlace {
            waits: self,
            repo: repo.clone(),
        })
    }

    /// A xorb was stored and indexed: waiting shards look again.
    pub fn stored(&self) {
        self.stored.notify_waiters();
    }
}

/// Whether this server honours [`AWAIT_XORBS`] (a wait bound and waiters configured).
pub fn enabled(state: &SharedState) -> bool {
    !state.config.shard_xorb_wait.is_zero() && state.config.max_waiting_shards > 0
}

/// The header that tells clients so, for upload answers.
pub fn advertised(state: &SharedState) -> Option<(HeaderName, HeaderValue)> {
    enabled(state).then(|| {
        (
            HeaderName::from_static(AWAIT_XORBS_LIMIT),
            HeaderValue::from(MAX_AWAITED),
        )
    })
}

/// The xorbs a shard upload asks to wait for (none without the header or when this server
/// does not wait). A malformed list, or a longer one than [`MAX_AWAITED`], is refused.
pub fn requested(state: &SharedState, headers: &HeaderMap) -> ServerResult<Vec<MerkleHash>> {
    let Some(value) = headers.get(AWAIT_XORBS) else {
        return Ok(Vec::new());
    };
    if !enabled(state) {
        return Ok(Vec::new());
    }
    let bad = |why: String| ServerError::bad_request(format!("{AWAIT_XORBS}: {why}"));
    let text = value.to_str().map_err(|_| bad("not ASCII".into()))?.trim();
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let names: Vec<&str> = text.split(',').map(str::trim).collect();
    if names.len() > MAX_AWAITED {
        return Err(bad(format!(
            "names {} xorbs, at most {MAX_AWAITED} may be awaited",
            names.len()
        )));
    }
    names
        .into_iter()
        .map(|h| MerkleHash::from_hex(h).map_err(|e| bad(format!("{h:?}: {e}"))))
        .collect()
}

/// Waits until every xorb of `awaited` is stored in `domain` (the condition validation
/// applies, shard_check.rs), for at most the server's bound; returns either way (validation
/// then decides). Without a free waiter place it returns at once.
pub async fn wait(
    state: &SharedState,
    awaited: Vec<MerkleHash>,
    repo: &RepoName,
    domain: &DedupDomain,
) {
    if awaited.is_empty() {
        return;
    }
    let waits = &state.xorb_waits;
    let Some(_repo_place) = waits.repo_place(repo) else {
        tracing::debug!(%repo, "this repository's shards take their share of the waiting places: validating this one at once");
        return;
    };
    let Ok(_place) = waits.waiters.try_acquire() else {
        tracing::debug!("too many shards waiting for xorbs: validating this one at once");
        return;
    };
    crate::metrics::add(&state.metrics.shards_awaiting_xorbs, 1);
    let deadline = tokio::time::Instant::now() + state.config.shard_xorb_wait;
    let mut missing = awaited;
    loop {
        // Registered before looking, so that a xorb stored meanwhile is not missed.
        let notified = waits.stored.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let (index, domain_now, look) = (state.index.clone(), domain.clone(), missing);
        missing = match blocking(move || Ok(still_missing(&*index, look, &domain_now))).await {
            Ok(m) => m,
            Err(_) => return,
        };
        if missing.is_empty() {
            return;
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return;
        }
        let until = deadline.min(now + POLL);
        tokio::select! {
            _ = &mut notified => {}
            _ = tokio::time::sleep_until(until) => {}
        }
    }
}

/// The xorbs of `hashes` not (yet) stored in `domain`; an index error counts as missing.
fn still_missing(
    index: &dyn Index,
    hashes: Vec<MerkleHash>,
    domain: &DedupDomain,
) -> Vec<MerkleHash> {
    hashes
        .into_iter()
        .filter(|h| {
            !matches!(index.xorb(h), Ok(Some(_)))
                || !index.xorb_in_domain(h, domain).unwrap_or(false)
        })
        .collect()
}
