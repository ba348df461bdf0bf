//! Which token ids are revoked, as the index says, remembered for a few seconds: a request
//! costs no index round trip for a token seen recently, and every server process sharing the
//! index refuses a revoked token at most `ttl` after `git xet server token revoke`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use git_xet_index::{Index, IndexResult};

/// How long an answer is remembered (documented in docs/server.md).
pub const DEFAULT_TTL: Duration = Duration::from_secs(5);
/// Ids remembered at most; the cache starts over past this (a flood of ids costs lookups,
/// not memory).
const MAX_ENTRIES: usize = 100_000;

pub struct RevocationCache {
    ttl: Duration,
    entries: Mutex<HashMap<String, (Instant, bool)>>,
}

impl RevocationCache {
    pub fn new(ttl: Duration) -> RevocationCache {
        RevocationCache {
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// Whether the token `id` is revoked: from memory when asked less than `ttl` ago, else
    /// from the index (a primary-key look-up).
    pub fn is_revoked(&self, index: &dyn Index, id: &str) -> IndexResult<bool> {
        self.is_revoked_at(index, id, git_xet_io::time::instant_now())
    }

    /// [`RevocationCache::is_revoked`] at the time `now` (tests pass their own).
    fn is_revoked_at(&self, index: &dyn Index, id: &str, now: Instant) -> IndexResult<bool> {
        if let Some(&(at, revoked)) = self.entries.lock().expect("revocation cache").get(id) {
            if now.saturating_duration_since(at) < self.ttl {
                return Ok(revoked);
            }
        }
        let revoked = index.token_revoked(id)?;
        let mut entries = self.entries.lock().expect("revocation cache");
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(id.to_string(), (now, revoked));
        Ok(revoked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_xet_index::{SqliteIndex, TokenIndex, TokenRecord};

    #[test]
    fn a_revocation_is_seen_once_the_remembered_answer_is_older_than_the_ttl() {
        let dir = tempfile::tempdir().unwrap();
        let index = SqliteIndex::open(&dir.path().join("i.sqlite"), false).unwrap();
        let record = TokenRecord {
            id: "t1".into(),
            user: "alice".into(),
            repo: "org/m".into(),
            scope: "write".into(),
            created: 1,
            expires: 2,
            revoked: false,
        };
        index.record_token(&record).unwrap();
        let ttl = Duration::from_secs(5);
        let cache = RevocationCache::new(ttl);
        let start = Instant::now();
        let at = |elapsed: Duration| start + elapsed;
        assert!(!cache.is_revoked_at(&index, "t1", start).unwrap());
        assert!(index.revoke_token("t1").unwrap());
        assert!(!index.revoke_token("nope").unwrap(), "unknown id");
        let almost = at(ttl - Duration::from_millis(1));
        assert!(
            !cache.is_revoked_at(&index, "t1", almost).unwrap(),
            "remembered"
        );
        assert!(cache.is_revoked_at(&index, "t1", at(ttl)).unwrap());
        assert!(!cache
            .is_revoked_at(&index, "never-recorded", at(ttl))
            .unwrap());
        let listed = index.tokens().unwrap();
        assert_eq!(listed.len(), 1);
        assert!(listed[0].revoked && listed[0].user == "alice");
    }
}
