//! Handing a download's bytes to a consumer while the file is still being written (git's
//! smudge filter streams them to git instead of waiting for the whole object).
//!
//! What passes through the tap is not verified yet: chunks reused from local files are
//! checked against their recorded hashes, but network data is verified only as a whole at
//! the end (length, XET file hash, sha256). The consumer must not treat the content as final
//! before the download succeeded.
//!
//! When a download retries from scratch (local or cached data turned out corrupt), the bytes
//! already handed over are not handed over again, but each chunk of them must hash the same
//! in the retry; otherwise the tap is marked diverged, and what was handed over must be
//! discarded even if the retry succeeds.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use git_xet_core::MerkleHash;

/// The sending side; clones share one channel and one count of bytes handed over.
#[derive(Clone)]
pub struct ContentTap {
    state: Arc<Mutex<TapState>>,
}

struct TapState {
    /// `None` once closed.
    tx: Option<SyncSender<Bytes>>,
    /// Bytes of the output handed over so far.
    forwarded: u64,
    /// Offset and hash of every chunk handed over, in order.
    sent: Vec<(u64, MerkleHash)>,
    diverged: bool,
}

impl ContentTap {
    /// A tap and the receiver of its bytes. At most `depth` pieces wait in the channel; past
    /// that the download waits for the consumer.
    pub fn new(depth: usize) -> (ContentTap, Receiver<Bytes>) {
        let (tx, rx) = sync_channel(depth);
        let state = TapState {
            tx: Some(tx),
            forwarded: 0,
            sent: Vec::new(),
            diverged: false,
        };
        (
            ContentTap {
                state: Arc::new(Mutex::new(state)),
            },
            rx,
        )
    }

    /// The output chunk `data` with hash `hash`, which starts at `offset`. Chunks come in
    /// order within one attempt; a chunk handed over in an earlier attempt is only compared.
    pub(crate) fn offer(&self, offset: u64, data: &Bytes, hash: MerkleHash) {
        let mut state = self.state.lock().expect("tap lock");
        if state.diverged {
            return;
        }
        if offset < state.forwarded {
            let end = offset + data.len() as u64;
            let same = state
                .sent
                .binary_search_by_key(&offset, |&(o, _)| o)
                .is_ok_and(|i| state.sent[i].1 == hash)
                && end <= state.forwarded;
            state.diverged |= !same;
            return;
        }
        if offset > state.forwarded {
            state.diverged = true;
            return;
        }
        let Some(tx) = state.tx.as_ref() else { return };
        if tx.send(data.clone()).is_err() {
            // The consumer is gone; the download itself goes on.
            state.tx = None;
            return;
        }
        state.forwarded += data.len() as u64;
        state.sent.push((offset, hash));
    }

    /// Whether a retry produced other chunks than were handed over before it.
    pub fn diverged(&self) -> bool {
        self.state.lock().expect("tap lock").diverged
    }

    /// Bytes handed over so far.
    pub fn forwarded(&self) -> u64 {
        self.state.lock().expect("tap lock").forwarded
    }

    /// Ends the stream: the receiver sees the channel close once it has taken what is queued.
    pub fn close(&self) {
        self.state.lock().expect("tap lock").tx = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_xet_core::hash::chunk_hash;

    fn offer(tap: &ContentTap, offset: u64, data: &[u8]) {
        tap.offer(offset, &Bytes::copy_from_slice(data), chunk_hash(data));
    }

    #[test]
    fn a_retry_hands_over_only_what_is_new() {
        let (tap, rx) = ContentTap::new(16);
        offer(&tap, 0, b"abcd");
        offer(&tap, 4, b"ef");
        // Second attempt from the start: the same chunks, then more.
        offer(&tap, 0, b"abcd");
        offer(&tap, 4, b"ef");
        offer(&tap, 6, b"ghij");
        tap.close();
        let got: Vec<u8> = rx.iter().flat_map(|b| b.to_vec()).collect();
        assert_eq!(got, b"abcdefghij");
        assert_eq!(tap.forwarded(), 10);
        assert!(!tap.diverged());
    }

    #[test]
    fn a_retry_with_other_content_or_boundaries_diverges() {
        for retry in [
            &[(0, &b"abcd"[..]), (4, b"eX")][..],
            &[(0, b"abc")],
            &[(0, b"abcdef")],
        ] {
            let (tap, rx) = ContentTap::new(16);
            offer(&tap, 0, b"abcd");
            offer(&tap, 4, b"ef");
            for (offset, data) in retry {
                offer(&tap, *offset, data);
            }
            offer(&tap, 6, b"gh");
            assert!(tap.diverged(), "{retry:?}");
            tap.close();
            assert_eq!(
                rx.iter().map(|b| b.len()).sum::<usize>(),
                6,
                "nothing more sent"
            );
        }
    }

    #[test]
    fn a_gone_consumer_does_not_stop_the_offers() {
        let (tap, rx) = ContentTap::new(1);
        drop(rx);
        offer(&tap, 0, b"abc");
        offer(&tap, 3, b"def");
        assert_eq!(tap.forwarded(), 0);
    }
}
