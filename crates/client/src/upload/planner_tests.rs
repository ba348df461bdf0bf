use std::sync::{Arc, Mutex};

use super::*;
use crate::shard_cache::save_own_shard;
use git_xet_core::hash::chunk_hash;
use git_xet_core::shard::{FooterOptions, Shard, XorbBlock};

/// Records what the planner sends to the packer.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<String>>>);

impl PackSink for Recorder {
    fn send(&mut self, msg: PackerMsg) -> Result<()> {
        let text = match msg {
            PackerMsg::Chunk { data, .. } => format!("chunk {}", data[0]),
            PackerMsg::Close { .. } => "close".to_string(),
            PackerMsg::Shard(s) => format!("shard {}", s.upload.len()),
        };
        self.0.lock().unwrap().push(text);
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// A chunk whose first byte is its id, `len` bytes long (ids stay distinguishable).
fn chunk(id: u16, len: usize) -> HashedChunk {
    let mut data = vec![id as u8; len];
    data[1] = (id >> 8) as u8;
    HashedChunk {
        hash: chunk_hash(&data),
        data: Bytes::from(data),
    }
}

fn chunks(ids: impl IntoIterator<Item = u16>) -> Vec<HashedChunk> {
    ids.into_iter().map(|i| chunk(i, 1000)).collect()
}

fn no_query() -> impl FnMut(&MerkleHash) -> Result<Option<Bytes>> {
    |_| panic!("no global query expected")
}

fn plan(session: &mut SessionPlanner, input: &[HashedChunk]) -> PlannedFile {
    let mut q = no_query();
    let mut file = session.file(None);
    for c in input {
        file.push(c.clone(), &mut q).unwrap();
    }
    file.finish().unwrap()
}

fn session_with(shards: ShardIndex) -> (SessionPlanner, Recorder) {
    let rec = Recorder::default();
    (
        SessionPlanner::new(shards, Box::new(rec.clone()), false, true, usize::MAX),
        rec,
    )
}

fn spans(file: &PlannedFile) -> Vec<(XorbRef, u32, u32)> {
    file.terms
        .iter()
        .map(|t| (t.xorb, t.start, t.end))
        .collect()
}

#[test]
fn new_data_is_one_term_per_xorb_and_repeats_dedup_in_session() {
    let (mut session, rec) = session_with(ShardIndex::empty());
    let input = chunks(0..20);
    let first = plan(&mut session, &input);
    assert_eq!(spans(&first), vec![(XorbRef::Slot(0), 0, 20)]);
    assert_eq!(first.stats.new_bytes, 20_000);
    assert_eq!(first.terms[0].bytes, 20_000);
    let expected_verification =
        git_xet_core::hash::verification_hash(input.iter().map(|c| &c.hash));
    assert_eq!(first.terms[0].verification, expected_verification);

    let second = plan(&mut session, &input);
    assert_eq!(spans(&second), spans(&first));
    assert_eq!(second.stats.session_bytes, 20_000);
    assert_eq!(second.stats.new_bytes, 0);
    assert_eq!(rec.0.lock().unwrap().len(), 20, "no chunk packed twice");
}

#[test]
fn short_dedup_runs_are_packed_again_long_ones_are_kept() {
    let (mut session, _rec) = session_with(ShardIndex::empty());
    plan(&mut session, &chunks(0..40));
    // 3 known chunks (too short), 5 new, 12 known (long enough), 2 new.
    let mixed: Vec<HashedChunk> = chunks((0..3).chain(100..105).chain(10..22).chain(200..202));
    let file = plan(&mut session, &mixed);
    assert_eq!(file.stats.session_bytes, 12_000);
    assert_eq!(file.stats.new_bytes, 10_000);
    assert_eq!(
        spans(&file),
        vec![
            (XorbRef::Slot(0), 40, 48),
            (XorbRef::Slot(0), 10, 22),
            (XorbRef::Slot(0), 48, 50)
        ]
    );
}

#[test]
fn a_short_run_that_ends_the_file_is_accepted() {
    let (mut session, _rec) = session_with(ShardIndex::empty());
    plan(&mut session, &chunks(0..10));
    let file = plan(&mut session, &chunks([50, 51, 7, 8, 9]));
    assert_eq!(
        spans(&file),
        vec![(XorbRef::Slot(0), 10, 12), (XorbRef::Slot(0), 7, 10)]
    );
    assert_eq!(file.stats.session_bytes, 3000);
}

#[test]
fn one_mib_of_large_chunks_is_a_long_enough_run() {
    let (mut session, _rec) = session_with(ShardIndex::empty());
    let big: Vec<HashedChunk> = (0..6).map(|i| chunk(i, 128 * 1024)).collect();
    plan(&mut session, &big);
    let mut input = vec![chunk(99, 1000)];
    input.extend(big[..4].iter().cloned()); // 512 KiB: too short
    input.push(chunk(98, 1000));
    input.extend(big.iter().cloned()); // 768 KiB: still too short
    input.push(chunk(97, 1000));
    let file = plan(&mut session, &input);
    // Neither run reaches 8 chunks or 1 MiB before it breaks: nothing is deduplicated.
    assert_eq!(file.stats.session_bytes, 0);

    let (mut session, _rec) = session_with(ShardIndex::empty());
    let big: Vec<HashedChunk> = (0..9).map(|i| chunk(i, 128 * 1024)).collect();
    plan(&mut session, &big);
    let mut input = vec![chunk(99, 1000)];
    input.extend(big[..8].iter().cloned()); // exactly 1 MiB
    input.push(chunk(98, 1000));
    let file = plan(&mut session, &input);
    assert_eq!(file.stats.session_bytes, 1024 * 1024);
}

#[test]
fn xorbs_close_at_the_chunk_limit() {
    let (mut session, rec) = session_with(ShardIndex::empty());
    let input: Vec<HashedChunk> = (0..(MAX_XORB_CHUNKS as u16 + 5))
        .map(|i| chunk(i, 100))
        .collect();
    let file = plan(&mut session, &input);
    assert_eq!(
        spans(&file),
        vec![
            (XorbRef::Slot(0), 0, MAX_XORB_CHUNKS as u32),
            (XorbRef::Slot(1), 0, 5)
        ]
    );
    assert_eq!(
        rec.0
            .lock()
            .unwrap()
            .iter()
            .filter(|m| *m == "close")
            .count(),
        1
    );
    session.close_open().unwrap();
    assert_eq!(session.new_xorbs().count(), 2);
    assert_eq!(
        session.new_xorbs().map(|(_, c)| c.len()).sum::<usize>(),
        input.len()
    );
}

#[test]
fn xorbs_close_at_the_size_limit() {
    let (mut session, _rec) = session_with(ShardIndex::empty());
    let input: Vec<HashedChunk> = (0..600).map(|i| chunk(i, 128 * 1024)).collect();
    let file = plan(&mut session, &input);
    // 64 MiB holds 511 chunks of 128 KiB once headers and the footer are counted.
    assert_eq!(
        spans(&file),
        vec![(XorbRef::Slot(0), 0, 511), (XorbRef::Slot(1), 0, 89)]
    );
}

fn cached_shard(dir: &std::path::Path, input: &[HashedChunk]) -> MerkleHash {
    let xorb_hash = chunk_hash(b"some xorb");
    let block = XorbBlock::from_chunks(
        xorb_hash,
        input.iter().map(|c| (c.hash, c.data.len() as u32)),
        0,
    );
    let shard = Shard {
        files: vec![],
        xorbs: vec![block],
    };
    save_own_shard(dir, &shard.to_stored_bytes(&FooterOptions::default())).unwrap();
    xorb_hash
}

#[test]
fn shard_cache_runs_become_known_terms() {
    let dir = tempfile::tempdir().unwrap();
    let known = cached_shard(dir.path(), &chunks(0..30));
    let (mut session, _rec) = session_with(ShardIndex::load(dir.path()));
    let file = plan(&mut session, &chunks((0..10).chain(500..502).chain(15..30)));
    assert_eq!(
        spans(&file),
        vec![
            (XorbRef::Known(known), 0, 10),
            (XorbRef::Slot(0), 0, 2),
            (XorbRef::Known(known), 15, 30)
        ]
    );
    assert_eq!(file.stats.shard_cache_bytes, 25_000);
    assert_eq!(file.stats.new_bytes, 2000);
}

#[test]
fn global_dedup_is_asked_for_the_first_chunk_and_its_answer_used() {
    let remote = chunks(0..30);
    let xorb_hash = chunk_hash(b"remote xorb");
    let key = chunk_hash(b"key");
    let mut block = XorbBlock::from_chunks(xorb_hash, remote.iter().map(|c| (c.hash, 1000)), 0);
    for c in &mut block.chunks {
        c.chunk_hash = git_xet_core::hash::keyed_chunk_hash(&key, &c.chunk_hash);
    }
    let answer = Shard {
        files: vec![],
        xorbs: vec![block],
    }
    .to_stored_bytes(&FooterOptions {
        chunk_hash_key: key,
        creation_timestamp: 0,
        key_expiry: u64::MAX,
    });

    let rec = Recorder::default();
    let mut session =
        SessionPlanner::new(ShardIndex::empty(), Box::new(rec), true, false, usize::MAX);
    let mut asked = Vec::new();
    let mut query = |h: &MerkleHash| {
        asked.push(*h);
        Ok(Some(Bytes::from(answer.clone())))
    };
    let mut file = session.file(None);
    for c in chunks(0..30) {
        file.push(c, &mut query).unwrap();
    }
    let planned = file.finish().unwrap();
    assert_eq!(asked, vec![remote[0].hash]);
    assert_eq!(spans(&planned), vec![(XorbRef::Known(xorb_hash), 0, 30)]);
    assert_eq!(planned.stats.global_bytes, 30_000);
    assert_eq!(planned.stats.global_queries, 1);
}

#[test]
fn a_failing_global_query_disables_global_dedup_but_not_the_upload() {
    let mut session = SessionPlanner::new(
        ShardIndex::empty(),
        Box::new(Recorder::default()),
        true,
        false,
        usize::MAX,
    );
    let mut calls = 0;
    let mut query = |_: &MerkleHash| {
        calls += 1;
        Err(crate::error::ClientError::Aborted("server down".into()))
    };
    for _ in 0..2 {
        let mut file = session.file(None);
        for c in chunks(0..3) {
            file.push(c, &mut query).unwrap();
        }
        file.finish().unwrap();
    }
    assert_eq!(calls, 1);
    assert!(!session.global_dedup);
}

#[test]
fn closed_xorbs_are_flushed_in_intermediate_shards() {
    let rec = Recorder::default();
    let mut session =
        SessionPlanner::new(ShardIndex::empty(), Box::new(rec.clone()), false, false, 10);
    // 128 KiB chunks: a xorb closes every 511 chunks; the flush follows the first close.
    let input: Vec<HashedChunk> = (0..1100).map(|i| chunk(i, 128 * 1024)).collect();
    let file = plan(&mut session, &input);
    assert_eq!(spans(&file).len(), 3);
    let log = rec.0.lock().unwrap().clone();
    let kinds: Vec<&str> = log
        .iter()
        .map(|m| m.split(' ').next().unwrap())
        .filter(|k| *k != "chunk")
        .collect();
    assert_eq!(kinds, ["close", "shard", "close", "shard"]);
    // Flushed xorbs leave memory: only the open one remains for the final shard.
    session.close_open().unwrap();
    assert_eq!(session.new_xorbs().count(), 1);
    // The terms still resolve to the flushed xorbs' hashes.
    for t in &file.terms {
        session.resolve(t.xorb);
    }
    // A repeat of flushed chunks is no longer found in the session: packed again.
    let again = plan(&mut session, &input[..20]);
    assert_eq!(again.stats.session_bytes, 0);
}
