//! Malformed input is rejected with a clear error, and never panics.

use git_xet_core::error::{ChunkHeaderError, CoreError, ShardError, XorbError};
use git_xet_core::hash::{chunk_hash, MerkleHash};
use git_xet_core::shard::{
    parse_shard, FileInfo, FileTerm, FooterOptions, Shard, ShardFile, XorbBlock,
};
use git_xet_core::xorb::{inspect_xorb, validate_xorb, ChunkRecords, XorbFooter};
use proptest::prelude::*;

use crate::common::splitmix_bytes;
use crate::xorbs::small_xorb;

/// Offsets of the footer's parts for a xorb of `n` chunks.
struct Layout {
    footer: usize,
    boundary: usize,
    trailer: usize,
}

fn layout(xorb: &[u8]) -> Layout {
    let f = XorbFooter::parse(xorb).unwrap();
    let n = f.num_chunks();
    let footer = f.data_len();
    let boundary = footer + 52 + 32 * n;
    Layout {
        footer,
        boundary,
        trailer: boundary + 12 + 8 * n,
    }
}

fn put_u32(bytes: &mut [u8], at: usize, v: u32) {
    bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u24(bytes: &mut [u8], at: usize, v: u32) {
    bytes[at..at + 3].copy_from_slice(&v.to_le_bytes()[..3]);
}

/// Why `validate_xorb` rejects the xorb (which must be a xorb error).
fn xorb_rejection(xorb: &[u8]) -> XorbError {
    match validate_xorb(xorb) {
        Ok(_) => panic!("xorb accepted"),
        Err(CoreError::Xorb(e)) => *e,
        Err(e) => panic!("not a xorb error: {e:?}"),
    }
}

/// Asserts the xorb is rejected with an error matching the pattern.
macro_rules! rejects {
    ($xorb:expr, $pattern:pat $(if $guard:expr)?) => {{
        let e = xorb_rejection(&$xorb);
        assert!(matches!(e, $pattern $(if $guard)?), "{e:?}");
    }};
}

/// Asserts the xorb is rejected for chunk `index`, with a cause matching the pattern.
macro_rules! rejects_chunk {
    ($xorb:expr, $index:expr, $pattern:pat $(if $guard:expr)?) => {{
        match xorb_rejection(&$xorb) {
            XorbError::Chunk { index, cause } => {
                assert_eq!(index, $index, "{cause:?}");
                assert!(matches!(*cause, $pattern $(if $guard)?), "{cause:?}");
            }
            e => panic!("not a chunk's error: {e:?}"),
        }
    }};
}

/// A chunk header rule broken by the chunk at `offset`.
fn header_error(offset: usize, kind: ChunkHeaderError) -> CoreError {
    XorbError::ChunkHeader { offset, kind }.into()
}

#[test]
fn xorb_chunk_header_rules() {
    let good = small_xorb();
    validate_xorb(&good).unwrap();
    let f = XorbFooter::parse(&good).unwrap();
    let c1 = f.chunk_record_range(1).start;

    let header_rule = |at: usize, put: &dyn Fn(&mut Vec<u8>), kind: ChunkHeaderError| {
        let mut x = good.clone();
        put(&mut x);
        let e = xorb_rejection(&x);
        let XorbError::Chunk { index, cause } = &e else {
            panic!("not a chunk's error: {e:?}")
        };
        assert_eq!((*index, &**cause), (1, &header_error(at, kind)), "{e:?}");
    };
    header_rule(c1, &|x| x[c1] = 1, ChunkHeaderError::UnknownVersion(1));
    header_rule(
        c1,
        &|x| x[c1 + 4] = 7,
        ChunkHeaderError::UnknownCompression(7),
    );
    header_rule(
        c1,
        &|x| put_u24(x, c1 + 5, 0),
        ChunkHeaderError::UncompressedSize(0),
    );
    header_rule(
        c1,
        &|x| put_u24(x, c1 + 5, 131_073),
        ChunkHeaderError::UncompressedSize(131_073),
    );
    header_rule(
        c1,
        &|x| put_u24(x, c1 + 1, 0),
        ChunkHeaderError::CompressedSize(0),
    );
    header_rule(
        c1,
        &|x| put_u24(x, c1 + 1, 131_073),
        ChunkHeaderError::CompressedSize(131_073),
    );

    // The message says which chunk, where, and what (as it did when it was a string).
    let mut x = good.clone();
    x[c1 + 4] = 7;
    assert_eq!(
        validate_xorb(&x).unwrap_err().to_string(),
        format!("invalid xorb: chunk 1: chunk at offset {c1}: unknown compression type 7")
    );

    // The last chunk claims more stored bytes than the chunk region holds.
    let c2 = f.chunk_record_range(2);
    let mut x = good.clone();
    put_u24(&mut x, c2.start + 1, (c2.len() - 8 + 100) as u32);
    let c2_error = |e: &CoreError| match e {
        CoreError::Xorb(e) => matches!(
            **e,
            XorbError::ChunkHeader {
                kind: ChunkHeaderError::PastEnd { .. },
                ..
            }
        ),
        _ => false,
    };
    rejects_chunk!(x, 2, ref e if c2_error(e));

    // A header that disagrees with the footer about the chunk's size.
    let mut x = good.clone();
    let declared = u32::from_le_bytes([x[c1 + 5], x[c1 + 6], x[c1 + 7], 0]);
    put_u24(&mut x, c1 + 5, declared - 1);
    let e = xorb_rejection(&x);
    assert_eq!(
        e,
        XorbError::ChunkSize {
            index: 1,
            header: declared - 1,
            footer: declared
        }
    );
}

#[test]
fn xorb_chunk_content_rules() {
    let good = small_xorb();
    let f = XorbFooter::parse(&good).unwrap();
    // Raw chunk changed: its hash no longer matches the footer.
    let mut x = good.clone();
    x[f.chunk_record_range(0).start + 100] ^= 1;
    rejects!(x, XorbError::ChunkHash { index: 0, .. });
    // LZ4 frame damaged.
    let mut x = good.clone();
    let r = f.chunk_record_range(1);
    for b in &mut x[r.start + 12..r.end - 4] {
        *b = 0xAA;
    }
    rejects_chunk!(x, 1, CoreError::Compression(_));
}

#[test]
fn xorb_footer_rules() {
    let good = small_xorb();
    let l = layout(&good);
    let info_len = good.len() - 4 - l.footer;

    for (at, what) in [
        (l.footer, "footer"),
        (l.footer + 40, "hash section"),
        (l.boundary, "boundary section"),
    ] {
        let mut x = good.clone();
        x[at] = b'Z';
        rejects!(x, XorbError::Ident { section, .. } if section == what);
    }
    let mut x = good.clone();
    x[l.footer + 7] = 2;
    rejects!(
        x,
        XorbError::Version {
            section: "footer",
            got: 2,
            ..
        }
    );
    let mut x = good.clone();
    x[l.footer + 47] = 1;
    rejects!(
        x,
        XorbError::Version {
            section: "hash section",
            got: 1,
            ..
        }
    );
    let mut x = good.clone();
    x[l.boundary + 7] = 0;
    rejects!(
        x,
        XorbError::Version {
            section: "boundary section",
            got: 0,
            ..
        }
    );

    let mut x = good.clone();
    put_u32(&mut x, l.boundary + 8, 2);
    rejects!(
        x,
        XorbError::SectionCount {
            section: "boundary section",
            count: 2,
            hashes: 3
        }
    );
    let mut x = good.clone();
    put_u32(&mut x, l.trailer, 4);
    rejects!(
        x,
        XorbError::SectionCount {
            section: "footer trailer",
            count: 4,
            hashes: 3
        }
    );
    let mut x = good.clone();
    put_u32(&mut x, l.trailer + 4, 1);
    rejects!(
        x,
        XorbError::SectionOffset {
            section: "hash section",
            got: 1,
            ..
        }
    );
    let mut x = good.clone();
    put_u32(&mut x, l.trailer + 8, 1);
    rejects!(
        x,
        XorbError::SectionOffset {
            section: "boundary section",
            got: 1,
            ..
        }
    );

    // Chunk count that does not match the footer's size, and absurd counts.
    let mut x = good.clone();
    put_u32(&mut x, l.footer + 48, 4);
    rejects!(x, XorbError::FooterLength { chunks: 4, .. });
    let mut x = good.clone();
    put_u32(&mut x, l.footer + 48, u32::MAX);
    rejects!(x, XorbError::TooManyChunks { .. });
    let mut x = good.clone();
    put_u32(&mut x, l.footer + 48, 0);
    rejects!(x, XorbError::NoChunks);

    // Length trailer.
    let n = good.len();
    let mut x = good.clone();
    put_u32(&mut x, n - 4, (n + 1) as u32);
    rejects!(x, XorbError::FooterLengthOutOfRange { .. });
    let mut x = good.clone();
    put_u32(&mut x, n - 4, (info_len - 40) as u32);
    assert!(validate_xorb(&x).is_err());

    // Boundaries: out of the chunk region, not increasing, and unpacked sizes of zero.
    let mut x = good.clone();
    put_u32(&mut x, l.boundary + 12 + 8, l.footer as u32 + 10);
    rejects!(x, XorbError::BoundariesEnd { .. });
    let mut x = good.clone();
    put_u32(&mut x, l.boundary + 12 + 4, 5);
    rejects!(
        x,
        XorbError::Boundary {
            index: 1,
            end: 5,
            ..
        }
    );
    let mut x = good.clone();
    let first_end = u32::from_le_bytes(x[l.boundary + 24..l.boundary + 28].try_into().unwrap());
    put_u32(&mut x, l.boundary + 28, first_end);
    rejects!(x, XorbError::UnpackedBoundary { index: 1, .. });

    // Stored xorb hash differs from the one the chunk hashes give.
    let mut x = good.clone();
    x[l.footer + 8] ^= 0xFF;
    rejects!(x, XorbError::Hash { .. });
    // ... which inspection reports instead of refusing.
    let report = inspect_xorb(&x).unwrap();
    assert!(!report.hash_verified && report.chunks_verified);
}

#[test]
fn xorb_truncated_anywhere_is_rejected() {
    let good = small_xorb();
    for len in (0..good.len())
        .step_by(97)
        .chain(good.len() - 300..good.len())
    {
        assert!(
            validate_xorb(&good[..len]).is_err(),
            "truncated to {len} accepted"
        );
        let _ = inspect_xorb(&good[..len]);
    }
}

#[test]
fn chunk_records_reject_truncation() {
    let good = small_xorb();
    let f = XorbFooter::parse(&good).unwrap();
    let region = &good[..f.data_len()];
    assert_eq!(ChunkRecords::new(region).count(), 3);
    let cut = &region[..region.len() - 1];
    assert!(ChunkRecords::new(cut).any(|r| r.is_err()));
    let header_only = &region[..5];
    assert!(ChunkRecords::new(header_only).next().unwrap().is_err());
}

fn h(seed: u64) -> MerkleHash {
    MerkleHash::from_slice(&splitmix_bytes(32, seed)).unwrap()
}

fn small_shard() -> Shard {
    let chunks: Vec<(MerkleHash, u32)> =
        (0..4).map(|i| (chunk_hash(&[i as u8]), 1000 + i)).collect();
    let xorb = XorbBlock::from_chunks(h(1), chunks, 0);
    let file = FileInfo {
        file_hash: h(2),
        terms: vec![FileTerm {
            xorb_hash: h(1),
            cas_flags: 0,
            unpacked_bytes: 2001,
            chunk_start: 0,
            chunk_end: 2,
        }],
        verification: Some(vec![h(3)]),
        sha256: Some(h(4)),
    };
    let file2 = FileInfo {
        file_hash: h(5),
        verification: None,
        sha256: None,
        ..file.clone()
    };
    Shard {
        files: vec![file, file2],
        xorbs: vec![xorb],
    }
}

/// Why `parse_shard` rejects the bytes (which must be a shard error).
fn shard_rejection(bytes: &[u8]) -> ShardError {
    match parse_shard(bytes) {
        Ok(_) => panic!("shard accepted"),
        Err(CoreError::Shard(e)) => *e,
        Err(e) => panic!("not a shard error: {e:?}"),
    }
}

/// Asserts the shard is rejected with an error matching the pattern.
macro_rules! shard_rejects {
    ($bytes:expr, $pattern:pat $(if $guard:expr)?) => {{
        let e = shard_rejection(&$bytes);
        assert!(matches!(e, $pattern $(if $guard)?), "{e:?}");
    }};
}

#[test]
fn shard_header_rules() {
    let good = small_shard().to_stored_bytes(&FooterOptions::default());
    parse_shard(&good).unwrap();
    let mut x = good.clone();
    x[20] ^= 1;
    shard_rejects!(x, ShardError::NotAShard);
    let mut x = good.clone();
    x[32] = 3;
    shard_rejects!(
        x,
        ShardError::Version {
            part: "header",
            got: 3,
            ..
        }
    );
    let mut x = good.clone();
    x[40] = 100;
    shard_rejects!(x, ShardError::FooterSize { size: 100, .. });
    // Claims a footer but has none (upload form with footer_size set).
    let mut upload = small_shard().to_upload_bytes();
    upload[40] = 200;
    shard_rejects!(upload, ShardError::Truncated { .. });
}

#[test]
fn shard_section_rules() {
    let good = small_shard().to_upload_bytes();
    parse_shard(&good).unwrap();
    // Records: header at 48; first file has header, 1 term, 1 verification, 1 metadata.
    let mut x = good.clone();
    x[48 + 32] = 1; // unknown flag bit
    shard_rejects!(
        x,
        ShardError::FileFlags {
            offset: 48,
            flags: 1,
            ..
        }
    );
    let mut x = good.clone();
    put_u32(&mut x, 48 + 36, u32::MAX); // lying entry count
    shard_rejection(&x);
    let mut x = good.clone();
    put_u32(&mut x, 96 + 44, 0); // term end before start
    shard_rejects!(
        x,
        ShardError::TermRange {
            term: 0,
            end: 0,
            ..
        }
    );
    // Trailing bytes after the CAS bookend.
    let mut x = good.clone();
    x.push(0);
    shard_rejects!(x, ShardError::TrailingBytes { .. });
    // A bookend whose trailing bytes are not zero.
    let mut x = good.clone();
    let n = x.len();
    x[n - 1] = 1;
    shard_rejects!(
        x,
        ShardError::Bookend {
            section: "CAS section",
            ..
        }
    );
    // CAS block whose chunk offsets or total disagree.
    let cas_start = good.len() - 48 * 6; // header + 4 chunks + bookend
    let mut x = good.clone();
    put_u32(&mut x, cas_start + 48 * 2 + 32, 5);
    shard_rejects!(
        x,
        ShardError::ChunkStart {
            index: 1,
            start: 5,
            ..
        }
    );
    let mut x = good.clone();
    put_u32(&mut x, cas_start + 40, 7);
    shard_rejects!(x, ShardError::XorbBytes { declared: 7, .. });
}

#[test]
fn shard_footer_rules() {
    let good = small_shard().to_stored_bytes(&FooterOptions::default());
    let footer = good.len() - 200;
    let mut x = good.clone();
    x[footer] = 2;
    shard_rejects!(
        x,
        ShardError::Version {
            part: "footer",
            got: 2,
            ..
        }
    );
    for (field, name) in [
        (8, "file info offset"),
        (16, "CAS info offset"),
        (24, "file lookup offset"),
        (40, "CAS lookup offset"),
        (192, "footer offset"),
    ] {
        let mut x = good.clone();
        x[footer + field] ^= 0x10;
        shard_rejects!(x, ShardError::FooterField { field, .. } if field == name);
        // Seeking through a damaged footer also refuses to work.
        assert!(ShardFile::open(std::io::Cursor::new(x)).is_err() || field == 8 || field == 16);
    }
    // A damaged lookup table parses but is reported as inconsistent.
    let lookup = u64::from_le_bytes(good[footer + 24..footer + 32].try_into().unwrap()) as usize;
    let mut x = good.clone();
    x[lookup] ^= 0xFF;
    let parsed = parse_shard(&x).unwrap();
    assert!(!parsed.lookup_problems().is_empty());
}

#[test]
fn shard_truncated_anywhere_is_rejected() {
    for bytes in [
        small_shard().to_stored_bytes(&FooterOptions::default()),
        small_shard().to_upload_bytes(),
    ] {
        for len in 0..bytes.len() {
            assert!(
                parse_shard(&bytes[..len]).is_err(),
                "truncated to {len} accepted"
            );
            if let Ok(mut f) = ShardFile::open(std::io::Cursor::new(bytes[..len].to_vec())) {
                let _ = f.file(&h(2));
                let _ = f.chunk(&h(7));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn mutated_xorbs_never_panic(edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6)) {
        let mut x = small_xorb();
        for (at, v) in edits {
            let i = at.index(x.len());
            x[i] = v;
        }
        let _ = validate_xorb(&x);
        let _ = inspect_xorb(&x);
        if let Ok(f) = XorbFooter::parse(&x) {
            let _ = git_xet_core::xorb::extract_chunks(&x, &f, 0, f.num_chunks());
        }
    }

    #[test]
    fn mutated_shards_never_panic(edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6), stored in any::<bool>()) {
        let mut x = if stored { small_shard().to_stored_bytes(&FooterOptions::default()) } else { small_shard().to_upload_bytes() };
        for (at, v) in edits {
            let i = at.index(x.len());
            x[i] = v;
        }
        if let Ok(p) = parse_shard(&x) {
            let _ = p.lookup_problems();
        }
        if let Ok(mut f) = ShardFile::open(std::io::Cursor::new(x)) {
            let _ = f.file(&h(2));
            let _ = f.xorb(&h(1));
            let _ = f.dedup_query(&[chunk_hash(&[0]), chunk_hash(&[1])]);
            let _ = f.read_all();
        }
    }
}

/// Inputs the fuzzers once crashed on: each must now be handled without a panic.
#[test]
fn fuzz_regressions_do_not_panic() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fuzz-regressions");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        let _ = validate_xorb(&bytes);
        let _ = inspect_xorb(&bytes);
        if let Ok(p) = parse_shard(&bytes) {
            let _ = p.lookup_problems();
        }
        if let Ok(mut f) = ShardFile::open(std::io::Cursor::new(bytes)) {
            let _ = f.file(&h(2));
            let _ = f.read_all();
        }
        seen += 1;
    }
    assert!(seen >= 1);
}
