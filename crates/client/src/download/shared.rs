//! Xorb bytes fetched once for several downloads of one batch. Small files uploaded
//! together sit side by side in shared xorbs; a batch reconstruction answer gives the
//! entries of such neighbours one URL that grants all their bytes (a run). Each download
//! then takes its entry's bytes from one ranged GET of the whole run instead of sending its
//! own: a clone of many small files costs a request per run, not per file.
//!
//! Only runs of small entries are shared, and a run's bytes are dropped once each of its
//! entries took its part; a download whose shared fetch fails fetches its entry alone.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::Mutex;

use crate::cas::CasApi;
use crate::download::plan::FetchUnit;
use git_xet_core::reconstruction::{FetchInfo, HttpRange};
use git_xet_core::MerkleHash;

/// Entries up to this size are shared (a small file's bytes; larger ones are bandwidth,
/// not round trips).
const MAX_ENTRY_BYTES: u64 = 1 << 20;
/// A run is cut at this many bytes (what one batch may hold in memory per run).
const MAX_RUN_BYTES: u64 = 8 << 20;

/// The runs of one batch answer.
#[derive(Debug, Default)]
pub struct SharedFetches {
    /// (xorb, entry bytes) -> run index.
    entries: HashMap<(MerkleHash, HttpRange), usize>,
    runs: Vec<Run>,
}

#[derive(Debug)]
struct Run {
    url: String,
    bytes: HttpRange,
    state: Mutex<State>,
}

#[derive(Debug)]
enum State {
    /// Not fetched yet; how many entries will take their part.
    Waiting(usize),
    /// Fetched; the entries still to take their part.
    Fetched(Bytes, usize),
    /// Fetched and all taken, or the fetch failed: entries fetch alone.
    Done,
}

impl SharedFetches {
    /// The runs among `fetch_info`: entries of one xorb with the same URL whose bytes touch,
    /// two or more of them. `None` when there are none.
    pub fn from_batch(fetch_info: &HashMap<MerkleHash, Vec<FetchInfo>>) -> Option<Arc<Self>> {
        let mut shared = SharedFetches::default();
        for (xorb, entries) in fetch_info {
            let mut small: Vec<&FetchInfo> = entries
                .iter()
                .filter(|e| e.url_range.len() <= MAX_ENTRY_BYTES)
                .collect();
            small.sort_by(|a, b| {
                (a.url.as_str(), a.url_range.start).cmp(&(b.url.as_str(), b.url_range.start))
            });
            let mut i = 0;
            while i < small.len() {
                let mut bytes = small[i].url_range;
                let mut j = i + 1;
                while j < small.len()
                    && small[j].url == small[i].url
                    && small[j].url_range.start <= bytes.end.saturating_add(1)
                    && small[j].url_range.end.max(bytes.end) - bytes.start < MAX_RUN_BYTES
                {
                    bytes.end = bytes.end.max(small[j].url_range.end);
                    j += 1;
                }
                if j - i > 1 {
                    let run = shared.runs.len();
                    for e in &small[i..j] {
                        shared.entries.insert((*xorb, e.url_range), run);
                    }
                    shared.runs.push(Run {
                        url: small[i].url.clone(),
                        bytes,
                        state: Mutex::new(State::Waiting(j - i)),
                    });
                }
                i = j;
            }
        }
        (!shared.runs.is_empty()).then(|| Arc::new(shared))
    }

    /// How many runs (one GET each).
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// The bytes of `unit` from its run (fetched by the first entry that asks), or `None`
    /// when it is in no run or the run's fetch failed: then it fetches alone.
    pub(crate) async fn take(&self, api: &CasApi, unit: &FetchUnit) -> Option<Bytes> {
        let run = &self.runs[*self.entries.get(&(unit.xorb, unit.url_range))?];
        if run.url != unit.url {
            return None;
        }
        let mut state = run.state.lock().await;
        if let State::Waiting(users) = *state {
            *state = match fetch(api, run).await {
                Some(data) => State::Fetched(data, users),
                None => State::Done,
            };
        }
        let State::Fetched(data, left) = &mut *state else {
            return None;
        };
        let from = (unit.url_range.start - run.bytes.start) as usize;
        let part = data.slice(from..from + unit.url_range.len() as usize);
        *left -= 1;
        if *left == 0 {
            *state = State::Done;
        }
        Some(part)
    }
}

async fn fetch(api: &CasApi, run: &Run) -> Option<Bytes> {
    let what = format!(
        "downloading bytes {}-{} shared by several files",
        run.bytes.start, run.bytes.end
    );
    let got = async {
        let response = api.fetch_range(&what, &run.url, run.bytes).await?;
        response
            .bytes()
            .await
            .map_err(|e| crate::error::ClientError::Aborted(format!("{what}: {e}")))
    };
    match got.await {
        Ok(data) if data.len() as u64 == run.bytes.len() => Some(data),
        Ok(data) => {
            tracing::debug!(
                "{what}: {} bytes came; fetching each file alone",
                data.len()
            );
            None
        }
        Err(e) => {
            tracing::debug!("{what}: {e}; fetching each file alone");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_xet_core::reconstruction::ChunkRange;

    fn entry(url: &str, chunks: (u32, u32), bytes: (u64, u64)) -> FetchInfo {
        FetchInfo {
            range: ChunkRange::new(chunks.0, chunks.1),
            url: url.into(),
            url_range: HttpRange {
                start: bytes.0,
                end: bytes.1,
            },
        }
    }

    #[test]
    fn runs_join_touching_entries_of_one_url_only() {
        let (x, y) = (
            MerkleHash::from_bytes([1; 32]),
            MerkleHash::from_bytes([2; 32]),
        );
        let mut map = HashMap::new();
        map.insert(
            x,
            vec![
                entry("run", (0, 1), (0, 99)),
                entry("run", (1, 2), (100, 199)),
                entry("own", (2, 3), (200, 299)),
                entry("run", (4, 5), (400, 499)), // a gap: alone
            ],
        );
        map.insert(y, vec![entry("u", (0, 1), (0, 9))]);
        let shared = SharedFetches::from_batch(&map).unwrap();
        assert_eq!(shared.runs(), 1);
        assert_eq!(shared.runs[0].bytes, HttpRange { start: 0, end: 199 });
        assert!(shared.entries.contains_key(&(
            x,
            HttpRange {
                start: 100,
                end: 199
            }
        )));
        assert!(!shared.entries.contains_key(&(
            x,
            HttpRange {
                start: 200,
                end: 299
            }
        )));
        assert!(!shared.entries.contains_key(&(
            x,
            HttpRange {
                start: 400,
                end: 499
            }
        )));
        // Nothing to share: no runs at all.
        map.remove(&x);
        assert!(SharedFetches::from_batch(&map).is_none());
        // Big entries stay alone.
        let big = vec![
            entry("b", (0, 1), (0, MAX_ENTRY_BYTES)),
            entry("b", (1, 2), (MAX_ENTRY_BYTES + 1, MAX_ENTRY_BYTES + 9)),
        ];
        assert!(SharedFetches::from_batch(&HashMap::from([(x, big)])).is_none());
    }
}
