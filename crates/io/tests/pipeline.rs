//! The chunk-and-hash pipeline finds exactly the protocol core's chunks and hashes, whatever
//! the reads, the file size (inline or threaded, across mapped windows) or the pieces fed.

use std::io::Read;

use git_xet_core::chunker::chunk_lengths;
use git_xet_core::hash::{chunk_hash, file_hash};
use git_xet_io::pipeline::{
    chunk_and_hash, chunk_and_hash_file, hash_stream, ChunkFeed, PipelineError, READ_BUFFER_SIZE,
};
use git_xet_io::platform::mmap::Mapper;
use proptest::prelude::*;

#[path = "../../core/tests/support/random.rs"]
#[allow(dead_code)]
mod random;
use random::mixed_data;

/// A reader that returns at most a few bytes per call.
struct Dribble<'a> {
    data: &'a [u8],
    step: usize,
}

impl Read for Dribble<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.step.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        self.step = self.step * 7 % 65_521 + 1;
        Ok(n)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn pipeline_matches_whole_input_chunking(seed in any::<u64>(), len in 0usize..600_000, step in 1usize..5000) {
        let data = mixed_data(seed, len);
        let expected = chunk_lengths(&data);
        let mut got = Vec::new();
        let summary = chunk_and_hash(Dribble { data: &data, step }, true, |c| {
            assert_eq!(c.hash, chunk_hash(&c.data));
            got.push(c.data.len());
            Ok::<(), ()>(())
        }).unwrap();
        prop_assert_eq!(&got, &expected);
        prop_assert_eq!(summary.size, data.len() as u64);
        let mut offset = 0;
        let leaves: Vec<_> = expected.iter().map(|&n| {
            let h = chunk_hash(&data[offset..offset + n]);
            offset += n;
            (h, n as u64)
        }).collect();
        prop_assert_eq!(summary.file_hash, file_hash(leaves));
    }
}

/// Both ways of reaching a file: mapped (the test's files are never truncated while mapped)
/// and read.
fn mappers() -> [Mapper; 2] {
    // SAFETY: no test truncates a file it maps.
    [unsafe { Mapper::new() }, Mapper::reading()]
}

/// Files larger than one mapped window / read buffer chunk identically on every path.
#[test]
fn file_pipeline_crosses_block_boundaries() {
    let data = mixed_data(7, 21 * 1024 * 1024 + 12345);
    let expected = chunk_lengths(&data);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("input.bin");
    std::fs::write(&path, &data).unwrap();
    let via_read = hash_stream(&data[..], true).unwrap();
    let sha: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(&data).into();
    for mapper in mappers() {
        let mut via_file = Vec::new();
        let file = std::fs::File::open(&path).unwrap();
        let summary = chunk_and_hash_file(&file, mapper, true, |c| {
            via_file.push(c.data.len());
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(via_file, expected, "{mapper:?}");
        assert_eq!(summary, via_read, "{mapper:?}");
        assert_eq!(summary.sha256, Some(sha));
    }
}

/// A file that another program truncates while it is read (as a file a user names may be)
/// fails the read with `UnexpectedEof`: the process is not killed (a mapping of it would die
/// with SIGBUS on the lost pages).
#[test]
fn a_file_truncated_while_read_is_an_error_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shrinking.bin");
    {
        let size = 40 * 1024 * 1024;
        std::fs::write(&path, mixed_data(11, size)).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let mut chunks = 0;
        let err = chunk_and_hash_file(&file, Mapper::reading(), false, |_| {
            chunks += 1;
            if chunks == 1 {
                // Another writer truncates the file after its first chunk was hashed.
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .unwrap()
                    .set_len(1000)
                    .unwrap();
            }
            Ok::<(), ()>(())
        })
        .unwrap_err();
        match err {
            PipelineError::Read(e) => {
                assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof, "{size}: {e}")
            }
            other => panic!("{size}: {other:?}"),
        }
    }
}

/// Small files are chunked on the calling thread instead of the threaded pipeline: the
/// chunks, file hash and sha256 are the same as the threaded path's, at every size up to
/// and across the inline limit, and a failing sink still stops it with its own error.
#[test]
fn small_files_chunk_inline_exactly_as_the_threaded_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("small.bin");
    for size in [
        0,
        1,
        100,
        8 * 1024,
        70_000,
        300_000,
        (1 << 20) - 1,
        1 << 20,
        (1 << 20) + 1,
    ] {
        let data = mixed_data(size as u64 + 3, size);
        std::fs::write(&path, &data).unwrap();
        let mut via_read = Vec::new();
        let threaded = chunk_and_hash(&data[..], true, |c| {
            via_read.push((c.hash, c.data.len()));
            Ok::<(), ()>(())
        })
        .unwrap();
        for mapper in mappers() {
            let mut via_file = Vec::new();
            let file = std::fs::File::open(&path).unwrap();
            let summary = chunk_and_hash_file(&file, mapper, true, |c| {
                via_file.push((c.hash, c.data.len()));
                Ok::<(), ()>(())
            })
            .unwrap();
            assert_eq!(via_file, via_read, "chunks of {size} bytes, {mapper:?}");
            assert_eq!(summary, threaded, "summary of {size} bytes, {mapper:?}");
            assert_eq!(summary.size, size as u64);
        }
    }
    let data = mixed_data(5, 900_000);
    std::fs::write(&path, &data).unwrap();
    let mut seen = 0;
    let file = std::fs::File::open(&path).unwrap();
    let err = chunk_and_hash_file(&file, Mapper::reading(), false, |_| {
        seen += 1;
        if seen == 2 {
            Err("sink full")
        } else {
            Ok(())
        }
    })
    .unwrap_err();
    assert!(matches!(err, PipelineError::Sink("sink full")), "{err:?}");
    assert_eq!(seen, 2, "stopped at the failing chunk");
}

/// A clean filter's [`ChunkFeed`] sees content in pkt-line-sized pieces: whatever the pieces,
/// it finds the same chunks and file hash as chunking the whole input, and skips inputs
/// shorter than one block.
#[test]
fn chunk_feed_matches_the_pipeline_whatever_the_pieces() {
    let data = mixed_data(11, 9 * 1024 * 1024 + 777);
    let expected = chunk_lengths(&data);
    let reference = hash_stream(&data[..], false).unwrap();
    for piece in [65_516, 1, 4 * 1024 * 1024, 3_000_001] {
        let mut feed = ChunkFeed::new();
        let mut fed = &data[..];
        // One-byte pieces for the first 100 KiB only, to keep the test quick.
        while !fed.is_empty() {
            let n = if piece == 1 && fed.len() < data.len() - 100_000 {
                65_516
            } else {
                piece
            }
            .min(fed.len());
            feed.feed(&fed[..n]);
            fed = &fed[n..];
        }
        let chunked = feed.finish().expect("over one block");
        assert_eq!(chunked.summary, reference, "pieces of {piece}");
        let lengths: Vec<usize> = chunked.chunks.iter().map(|c| c.1 as usize).collect();
        assert_eq!(lengths, expected);
        let mut offset = 0;
        for (hash, len) in &chunked.chunks {
            let end = offset + *len as usize;
            assert_eq!(*hash, chunk_hash(&data[offset..end]));
            offset = end;
        }
    }
    let mut small = ChunkFeed::new();
    small.feed(&data[..READ_BUFFER_SIZE - 1]);
    assert!(
        small.finish().is_none(),
        "inputs under one block are left alone"
    );
    let mut exact = ChunkFeed::new();
    exact.feed(&data[..READ_BUFFER_SIZE]);
    assert_eq!(
        exact.finish().unwrap().summary,
        hash_stream(&data[..READ_BUFFER_SIZE], false).unwrap()
    );
}
