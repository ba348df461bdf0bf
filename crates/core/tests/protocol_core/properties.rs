//! Properties: chunking does not depend on how input is split; the streaming Merkle tree
//! equals the specification's algorithm; xorbs and shards round-trip; any chunk range of a
//! packed xorb extracts to exactly the input bytes.

use git_xet_core::chunker::{chunk_ends, chunk_lengths, Chunker};
use git_xet_core::compression::{
    bg4_regroup, bg4_split, compress_with, decompress_into, CompressionScheme,
};
use git_xet_core::hash::{chunk_hash, keyed_chunk_hash, MerkleHash};
use git_xet_core::merkle::{internal_node_hash, merkle_root};
use git_xet_core::shard::{
    parse_shard, FileInfo, FileTerm, FooterOptions, Shard, ShardFile, XorbBlock, XorbChunk,
};
use git_xet_core::xorb::{extract_chunks, validate_xorb, XorbBuilder};
use proptest::prelude::*;

use crate::common::splitmix_bytes;
use crate::random::mixed_data;

/// Boundaries found by feeding `data` to a streaming chunker in pieces of the given sizes.
fn streamed_lengths(data: &[u8], pieces: &[usize]) -> Vec<usize> {
    let mut chunker = Chunker::new();
    let mut lengths = Vec::new();
    let mut current = 0;
    let mut pos = 0;
    let mut k = 0;
    while pos < data.len() {
        let size = pieces[k % pieces.len()].max(1);
        k += 1;
        let mut piece = &data[pos..(pos + size).min(data.len())];
        pos += piece.len();
        while let Some(n) = chunker.next_boundary(piece) {
            lengths.push(current + n);
            current = 0;
            piece = &piece[n..];
        }
        current += piece.len();
    }
    if let Some(last) = chunker.finish() {
        assert_eq!(last, current);
        lengths.push(last);
    }
    lengths
}

/// The specification's Merkle algorithm, transcribed literally (hence the index loop).
#[allow(clippy::needless_range_loop)]
fn spec_merkle_root(entries: &[(MerkleHash, u64)]) -> MerkleHash {
    fn next_merge_cut(h: &[(MerkleHash, u64)]) -> usize {
        let n = h.len();
        if n <= 2 {
            return n;
        }
        let end = n.min(9);
        for i in 2..end {
            if h[i].0.last_word() % 4 == 0 {
                return i + 1;
            }
        }
        end
    }
    if entries.is_empty() {
        return MerkleHash::ZERO;
    }
    let mut hv = entries.to_vec();
    while hv.len() > 1 {
        let mut next = Vec::new();
        let mut i = 0;
        while i < hv.len() {
            let cut = i + next_merge_cut(&hv[i..]);
            next.push(internal_node_hash(&hv[i..cut]));
            i = cut;
        }
        hv = next;
    }
    hv[0].0
}

fn hash_of(seed: u64) -> MerkleHash {
    MerkleHash::from_slice(&splitmix_bytes(32, seed)).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn chunking_is_independent_of_input_splits(
        seed in any::<u64>(),
        len in 0usize..700_000,
        pieces in prop::collection::vec(1usize..150_000, 1..8),
    ) {
        let data = mixed_data(seed, len);
        prop_assert_eq!(streamed_lengths(&data, &pieces), chunk_lengths(&data));
    }

    /// A chunker started at any offset finds the whole input's boundaries from the first one
    /// both have on (what lets a block's halves be cut at once), and its state after its last
    /// boundary holds the rest.
    #[test]
    fn a_chunker_started_anywhere_agrees_from_the_first_shared_boundary(
        seed in any::<u64>(),
        len in 0usize..700_000,
        from in 0usize..700_000,
    ) {
        let data = mixed_data(seed, len);
        let from = from.min(len);
        let (ends, mut rest) = chunk_ends(&data[from..]);
        let tail = data.len() - from - ends.last().copied().unwrap_or(0);
        prop_assert_eq!(rest.finish(), (tail > 0).then_some(tail));
        let whole: Vec<usize> = chunk_lengths(&data)
            .iter()
            .scan(0, |end, len| { *end += len; Some(*end) })
            .collect();
        let partial: Vec<usize> = ends.iter().map(|e| from + e).collect();
        if let Some(first) = partial.iter().position(|e| whole.contains(e)) {
            let at = whole.iter().position(|e| *e == partial[first]).unwrap();
            // The helper's boundaries after the meeting point, and the whole input's up to
            // where the helper stopped (its tail is an unfinished chunk).
            let after = &partial[first..];
            prop_assert_eq!(after, &whole[at..at + after.len()]);
        }
    }

    #[test]
    fn streaming_merkle_equals_spec_algorithm(seeds in prop::collection::vec(any::<u64>(), 0..300)) {
        let leaves: Vec<_> = seeds.iter().map(|&s| (hash_of(s), s % 131_072 + 1)).collect();
        prop_assert_eq!(merkle_root(&leaves), spec_merkle_root(&leaves));
    }

    #[test]
    fn hash_strings_round_trip(bytes in prop::array::uniform32(any::<u8>())) {
        let h = MerkleHash::from_bytes(bytes);
        prop_assert_eq!(MerkleHash::from_hex(&h.to_hex()).unwrap(), h);
        prop_assert_eq!(serde_json::from_str::<MerkleHash>(&serde_json::to_string(&h).unwrap()).unwrap(), h);
    }

    #[test]
    fn compression_round_trips(seed in any::<u64>(), len in 1usize..=131_072, kind in 0u8..3) {
        let data = match kind {
            0 => splitmix_bytes(len, seed),
            1 => mixed_data(seed, len),
            _ => (0..len).map(|i| ((i as f32 / 300.0).sin().to_le_bytes())[i % 4]).collect(),
        };
        prop_assert_eq!(bg4_regroup(&bg4_split(&data)), data.clone());
        for scheme in [CompressionScheme::None, CompressionScheme::Lz4, CompressionScheme::ByteGrouping4Lz4] {
            let (used, stored) = compress_with(scheme, &data);
            prop_assert!(stored.len() <= data.len());
            let mut out = Vec::new();
            decompress_into(used, &stored, data.len(), &mut out).unwrap();
            prop_assert_eq!(&out, &data);
        }
    }

    #[test]
    fn xorbs_round_trip_and_extract_any_range(
        specs in prop::collection::vec((any::<u64>(), 1usize..=131_072, 0u8..3), 1..14),
        a in any::<prop::sample::Index>(),
        b in any::<prop::sample::Index>(),
    ) {
        let chunks: Vec<Vec<u8>> = specs.iter().map(|&(seed, len, kind)| match kind {
            0 => splitmix_bytes(len, seed),
            1 => mixed_data(seed, len),
            _ => (0..len).map(|i| ((i as f32 / 97.0).cos().to_le_bytes())[i % 4]).collect(),
        }).collect();
        let mut builder = XorbBuilder::new();
        for c in &chunks {
            builder.push_data(c).unwrap();
        }
        let xorb = builder.finish();
        let footer = validate_xorb(&xorb.bytes).unwrap();
        prop_assert_eq!(&footer, &xorb.footer);
        prop_assert_eq!(footer.num_chunks(), chunks.len());
        for (i, c) in chunks.iter().enumerate() {
            prop_assert_eq!(footer.chunk_hashes[i], chunk_hash(c));
        }
        let (i, j) = (a.index(chunks.len()), b.index(chunks.len()));
        let (start, end) = (i.min(j), i.max(j) + 1);
        let extracted = extract_chunks(&xorb.bytes, &footer, start, end).unwrap();
        prop_assert_eq!(extracted, chunks[start..end].concat());
    }

    #[test]
    fn shards_round_trip_in_both_forms(
        files in prop::collection::vec((any::<u64>(), prop::collection::vec((any::<u64>(), 0u32..5000, 1u32..60, 1u32..200_000), 0..5), any::<bool>(), any::<bool>()), 0..5),
        xorbs in prop::collection::vec((any::<u64>(), prop::collection::vec((any::<u64>(), 1u32..131_072), 1..12)), 0..5),
        key_seed in prop::option::of(any::<u64>()),
    ) {
        let mut shard = Shard::new();
        for (seed, terms, verify, sha) in &files {
            let terms: Vec<FileTerm> = terms.iter().map(|&(x, start, n, bytes)| FileTerm {
                xorb_hash: hash_of(x), cas_flags: 0, unpacked_bytes: bytes, chunk_start: start, chunk_end: start + n,
            }).collect();
            let verification = verify.then(|| (0..terms.len() as u64).map(|k| hash_of(seed ^ k)).collect());
            shard.files.push(FileInfo {
                file_hash: hash_of(*seed),
                verification,
                sha256: sha.then(|| hash_of(seed.wrapping_add(1))),
                terms,
            });
        }
        for (seed, chunks) in &xorbs {
            shard.xorbs.push(XorbBlock::from_chunks(
                hash_of(*seed),
                chunks.iter().map(|&(c, size)| (hash_of(c), size)),
                0,
            ));
        }
        // Writers emit one block per hash, in hash order.
        shard.files.sort_by_key(|f| f.file_hash);
        shard.files.dedup_by_key(|f| f.file_hash);
        shard.xorbs.sort_by_key(|x| x.xorb_hash);
        shard.xorbs.dedup_by_key(|x| x.xorb_hash);

        let upload = parse_shard(&shard.to_upload_bytes()).unwrap();
        prop_assert_eq!(&upload.shard, &shard);
        prop_assert!(upload.footer.is_none());

        let options = FooterOptions {
            chunk_hash_key: key_seed.map(hash_of).unwrap_or(MerkleHash::ZERO),
            creation_timestamp: 1_700_000_000,
            key_expiry: 1_800_000_000,
        };
        let stored = shard.to_stored_bytes(&options);
        let parsed = parse_shard(&stored).unwrap();
        prop_assert_eq!(&parsed.shard, &shard);
        prop_assert!(parsed.lookup_problems().is_empty(), "{:?}", parsed.lookup_problems());
        let footer = parsed.footer.unwrap();
        prop_assert_eq!(footer.chunk_hash_key, options.chunk_hash_key);
        prop_assert_eq!(footer.materialized_bytes, shard.materialized_bytes());

        let mut file = ShardFile::open(std::io::Cursor::new(stored)).unwrap();
        for f in &shard.files {
            prop_assert_eq!(file.file(&f.file_hash).unwrap(), Some(f.clone()));
        }
        for x in &shard.xorbs {
            prop_assert_eq!(file.xorb(&x.xorb_hash).unwrap(), Some(x.clone()));
        }
        if options.chunk_hash_key == MerkleHash::ZERO {
            for x in &shard.xorbs {
                for (i, c) in x.chunks.iter().enumerate() {
                    prop_assert!(file.chunk(&c.chunk_hash).unwrap().contains(&(x.xorb_hash, i as u32)));
                }
            }
        }
    }
}

/// A global-dedup style shard stores keyed chunk hashes; a lookup with the plain hash finds
/// the chunk, and dedup_query matches a run of plain hashes.
#[test]
fn keyed_shard_lookups_use_the_key() {
    let key = hash_of(99);
    let plain: Vec<MerkleHash> = (0..10).map(hash_of).collect();
    let xorb = XorbBlock {
        xorb_hash: hash_of(1000),
        cas_flags: 0,
        num_bytes_in_xorb: 10 * 4096,
        num_bytes_on_disk: 0,
        chunks: plain
            .iter()
            .enumerate()
            .map(|(i, h)| XorbChunk {
                chunk_hash: keyed_chunk_hash(&key, h),
                byte_range_start: i as u32 * 4096,
                unpacked_bytes: 4096,
                flags: 0,
            })
            .collect(),
    };
    let shard = Shard {
        files: vec![],
        xorbs: vec![xorb],
    };
    let bytes = shard.to_stored_bytes(&FooterOptions {
        chunk_hash_key: key,
        creation_timestamp: 1,
        key_expiry: 2,
    });
    let mut file = ShardFile::open(std::io::Cursor::new(bytes)).unwrap();
    assert_eq!(file.chunk(&plain[3]).unwrap(), vec![(hash_of(1000), 3)]);
    let (n, term) = file.dedup_query(&plain[2..7]).unwrap().unwrap();
    assert_eq!(
        (n, term.chunk_start, term.chunk_end, term.unpacked_bytes),
        (5, 2, 7, 5 * 4096)
    );
    // A hash the shard does not hold, keyed or not, is not found.
    assert!(file.chunk(&hash_of(12345)).unwrap().is_empty());
    assert!(file
        .chunk(&keyed_chunk_hash(&key, &plain[3]))
        .unwrap()
        .is_empty());
}
