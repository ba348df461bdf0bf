//! Reading shards front to back, from a byte slice or any reader (the streaming form).
//!
//! Counts in the file are never trusted for allocation: records are read one at a time, so
//! memory follows the bytes actually present and a lying count ends in a truncation error.

use std::io::Read;

use crate::error::{Result, ShardError};
use crate::hash::MerkleHash;
use crate::shard::types::*;

/// A parsed shard: contents, and for the stored form its footer and lookup tables.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ParsedShard {
    pub shard: Shard,
    /// The 14-byte application id at the start of the tag ("HFRepoMetaData" here).
    pub application_id: String,
    pub footer: Option<ShardFooter>,
    pub lookups: Option<ShardLookups>,
}

/// The three lookup tables of a stored shard, as read.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct ShardLookups {
    /// (first word of file hash, record index of the file's header)
    pub files: Vec<(u64, u32)>,
    /// (first word of xorb hash, record index of the xorb's header)
    pub xorbs: Vec<(u64, u32)>,
    /// (first word of chunk hash, record index of the xorb's header, chunk index in the xorb)
    pub chunks: Vec<(u64, u32, u32)>,
}

/// Parses a complete shard held in memory (either form).
pub fn parse_shard(bytes: &[u8]) -> Result<ParsedShard> {
    let mut cursor = bytes;
    let parsed = read_shard(&mut cursor)?;
    Ok(parsed)
}

/// Reads one shard from a stream, front to back, and checks that the stream ends with it.
pub fn read_shard<R: Read>(reader: &mut R) -> Result<ParsedShard> {
    let mut r = Records {
        inner: reader,
        pos: 0,
    };
    let (application_id, footer_size) = r.header()?;
    let mut shard = Shard::new();
    while let Some(file) = r.file_block()? {
        shard.files.push(file);
    }
    let files_end = r.pos;
    while let Some(xorb) = r.xorb_block()? {
        shard.xorbs.push(xorb);
    }
    let xorbs_end = r.pos;

    let (footer, lookups) = if footer_size == 0 {
        (None, None)
    } else {
        let lookups = r.lookups(&shard)?;
        let footer = r.footer()?;
        check_footer(&footer, &lookups, files_end, xorbs_end, r.pos)?;
        (Some(footer), Some(lookups))
    };
    r.expect_end()?;
    Ok(ParsedShard {
        shard,
        application_id,
        footer,
        lookups,
    })
}

/// A stream of 48-byte records with its position, for error messages.
pub(crate) struct Records<'a, R: Read> {
    pub(crate) inner: &'a mut R,
    pub(crate) pos: u64,
}

impl<R: Read> Records<'_, R> {
    fn read<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N]> {
        let mut buf = [0u8; N];
        self.inner.read_exact(&mut buf).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                ShardError::Truncated {
                    what,
                    offset: self.pos,
                }
            } else {
                ShardError::read(format!("reading {what} at offset {}", self.pos), &e)
            }
        })?;
        self.pos += N as u64;
        Ok(buf)
    }

    fn header(&mut self) -> Result<(String, u64)> {
        let h: [u8; SHARD_HEADER_LEN] = self.read("header")?;
        if h[14..32] != SHARD_HEADER_TAG[14..32] {
            return Err(ShardError::NotAShard.into());
        }
        let version = u64::from_le_bytes(h[32..40].try_into().expect("8 bytes"));
        if version != SHARD_HEADER_VERSION {
            return Err(ShardError::Version {
                part: "header",
                got: version,
                expected: SHARD_HEADER_VERSION,
            }
            .into());
        }
        let footer_size = u64::from_le_bytes(h[40..48].try_into().expect("8 bytes"));
        if footer_size != 0 && footer_size != SHARD_FOOTER_LEN as u64 {
            return Err(ShardError::FooterSize {
                size: footer_size,
                expected: SHARD_FOOTER_LEN as u64,
            }
            .into());
        }
        let app_end = h[..14].iter().position(|&b| b == 0).unwrap_or(14);
        let application_id = String::from_utf8_lossy(&h[..app_end]).into_owned();
        Ok((application_id, footer_size))
    }

    /// Reads one 48-byte record as a hash and four u32 words.
    pub(crate) fn record(&mut self, what: &'static str) -> Result<(MerkleHash, [u32; 4])> {
        let rec: [u8; SHARD_RECORD_LEN] = self.read(what)?;
        let hash = MerkleHash::from_slice(&rec[..32]).expect("32 bytes");
        let words = std::array::from_fn(|i| {
            u32::from_le_bytes(rec[32 + 4 * i..36 + 4 * i].try_into().expect("4 bytes"))
        });
        Ok((hash, words))
    }

    fn check_bookend(&self, words: [u32; 4], what: &'static str) -> Result<()> {
        if words != [0; 4] {
            return Err(ShardError::Bookend {
                section: what,
                offset: self.pos - SHARD_RECORD_LEN as u64,
            }
            .into());
        }
        Ok(())
    }

    /// Reads a file block, or `None` at the section's bookend.
    pub(crate) fn file_block(&mut self) -> Result<Option<FileInfo>> {
        let at = self.pos;
        let (file_hash, [flags, n, _, _]) = self.record("file header")?;
        if file_hash == MerkleHash::BOOKEND {
            self.check_bookend([flags, n, 0, 0], "file section")?;
            return Ok(None);
        }
        let known = FILE_FLAG_WITH_VERIFICATION | FILE_FLAG_WITH_METADATA_EXT;
        if flags & !known != 0 {
            return Err(ShardError::FileFlags {
                file: file_hash,
                offset: at,
                flags,
            }
            .into());
        }
        let mut terms = Vec::new();
        for i in 0..n {
            let (xorb_hash, [cas_flags, unpacked_bytes, chunk_start, chunk_end]) =
                self.record("file term")?;
            if chunk_end <= chunk_start {
                return Err(ShardError::TermRange {
                    file: file_hash,
                    term: i,
                    start: chunk_start,
                    end: chunk_end,
                }
                .into());
            }
            if xorb_hash == MerkleHash::BOOKEND {
                return Err(ShardError::MissingTerms {
                    file: file_hash,
                    declared: n,
                    found: i,
                }
                .into());
            }
            terms.push(FileTerm {
                xorb_hash,
                cas_flags,
                unpacked_bytes,
                chunk_start,
                chunk_end,
            });
        }
        let verification = if flags & FILE_FLAG_WITH_VERIFICATION != 0 {
            let mut hashes = Vec::new();
            for _ in 0..n {
                hashes.push(self.record("verification entry")?.0);
            }
            Some(hashes)
        } else {
            None
        };
        let sha256 = if flags & FILE_FLAG_WITH_METADATA_EXT != 0 {
            Some(self.record("metadata extension")?.0)
        } else {
            None
        };
        Ok(Some(FileInfo {
            file_hash,
            terms,
            verification,
            sha256,
        }))
    }

    /// Reads a CAS block, or `None` at the section's bookend.
    pub(crate) fn xorb_block(&mut self) -> Result<Option<XorbBlock>> {
        let at = self.pos;
        let (xorb_hash, [cas_flags, n, num_bytes_in_xorb, num_bytes_on_disk]) =
            self.record("xorb header")?;
        if xorb_hash == MerkleHash::BOOKEND {
            self.check_bookend(
                [cas_flags, n, num_bytes_in_xorb, num_bytes_on_disk],
                "CAS section",
            )?;
            return Ok(None);
        }
        let mut chunks = Vec::new();
        let mut expected_start = 0u64;
        for i in 0..n {
            let (chunk_hash, [byte_range_start, unpacked_bytes, flags, _]) =
                self.record("xorb chunk")?;
            if chunk_hash == MerkleHash::BOOKEND {
                return Err(ShardError::MissingChunks {
                    xorb: xorb_hash,
                    offset: at,
                    declared: n,
                    found: i,
                }
                .into());
            }
            if u64::from(byte_range_start) != expected_start || unpacked_bytes == 0 {
                return Err(ShardError::ChunkStart {
                    xorb: xorb_hash,
                    index: i,
                    start: byte_range_start,
                    bytes: unpacked_bytes,
                    expected: expected_start,
                }
                .into());
            }
            expected_start += u64::from(unpacked_bytes);
            chunks.push(XorbChunk {
                chunk_hash,
                byte_range_start,
                unpacked_bytes,
                flags,
            });
        }
        if expected_start != u64::from(num_bytes_in_xorb) {
            return Err(ShardError::XorbBytes {
                xorb: xorb_hash,
                total: expected_start,
                declared: num_bytes_in_xorb,
            }
            .into());
        }
        Ok(Some(XorbBlock {
            xorb_hash,
            cas_flags,
            num_bytes_in_xorb,
            num_bytes_on_disk,
            chunks,
        }))
    }

    fn lookups(&mut self, shard: &Shard) -> Result<ShardLookups> {
        let mut lookups = ShardLookups::default();
        for _ in 0..shard.files.len() {
            let e: [u8; 12] = self.read("file lookup entry")?;
            lookups.files.push(split12(&e));
        }
        for _ in 0..shard.xorbs.len() {
            let e: [u8; 12] = self.read("CAS lookup entry")?;
            lookups.xorbs.push(split12(&e));
        }
        let n_chunks: usize = shard.xorbs.iter().map(|x| x.chunks.len()).sum();
        for _ in 0..n_chunks {
            let e: [u8; 16] = self.read("chunk lookup entry")?;
            let (key, xorb_index) = split12(e[..12].try_into().expect("12 bytes"));
            let chunk_index = u32::from_le_bytes(e[12..16].try_into().expect("4 bytes"));
            lookups.chunks.push((key, xorb_index, chunk_index));
        }
        Ok(lookups)
    }

    pub(crate) fn footer(&mut self) -> Result<ShardFooter> {
        let f: [u8; SHARD_FOOTER_LEN] = self.read("footer")?;
        Ok(decode_footer(&f))
    }

    fn expect_end(&mut self) -> Result<()> {
        let mut probe = [0u8; 1];
        match self.inner.read(&mut probe) {
            Ok(0) => Ok(()),
            Ok(_) => Err(ShardError::TrailingBytes { offset: self.pos }.into()),
            Err(e) => Err(ShardError::read(format!("reading past offset {}", self.pos), &e).into()),
        }
    }
}

fn split12(e: &[u8; 12]) -> (u64, u32) {
    (
        u64::from_le_bytes(e[..8].try_into().expect("8 bytes")),
        u32::from_le_bytes(e[8..12].try_into().expect("4 bytes")),
    )
}

pub(crate) fn decode_footer(f: &[u8; SHARD_FOOTER_LEN]) -> ShardFooter {
    let u = |i: usize| u64::from_le_bytes(f[i..i + 8].try_into().expect("8 bytes"));
    ShardFooter {
        version: u(0),
        file_info_offset: u(8),
        cas_info_offset: u(16),
        file_lookup_offset: u(24),
        file_lookup_num_entries: u(32),
        cas_lookup_offset: u(40),
        cas_lookup_num_entries: u(48),
        chunk_lookup_offset: u(56),
        chunk_lookup_num_entries: u(64),
        chunk_hash_key: MerkleHash::from_slice(&f[72..104]).expect("32 bytes"),
        creation_timestamp: u(104),
        key_expiry: u(112),
        stored_bytes_on_disk: u(168),
        materialized_bytes: u(176),
        stored_bytes: u(184),
        footer_offset: u(192),
    }
}

/// The footer's offsets and counts must describe the sections just read.
fn check_footer(
    f: &ShardFooter,
    lookups: &ShardLookups,
    files_end: u64,
    xorbs_end: u64,
    end: u64,
) -> Result<()> {
    if f.version != SHARD_FOOTER_VERSION {
        return Err(ShardError::Version {
            part: "footer",
            got: f.version,
            expected: SHARD_FOOTER_VERSION,
        }
        .into());
    }
    // Untrusted values: an overflowing end can never match the layout, so it maps to MAX.
    let table_end = |offset: u64, n: u64, width: u64| {
        n.checked_mul(width)
            .and_then(|len| offset.checked_add(len))
            .unwrap_or(u64::MAX)
    };
    let file_lookup_end = table_end(f.file_lookup_offset, f.file_lookup_num_entries, 12);
    let cas_lookup_end = table_end(f.cas_lookup_offset, f.cas_lookup_num_entries, 12);
    let expected = [
        (
            "file info offset",
            f.file_info_offset,
            SHARD_HEADER_LEN as u64,
        ),
        ("CAS info offset", f.cas_info_offset, files_end),
        ("file lookup offset", f.file_lookup_offset, xorbs_end),
        (
            "file lookup entries",
            f.file_lookup_num_entries,
            lookups.files.len() as u64,
        ),
        ("CAS lookup offset", f.cas_lookup_offset, file_lookup_end),
        (
            "CAS lookup entries",
            f.cas_lookup_num_entries,
            lookups.xorbs.len() as u64,
        ),
        ("chunk lookup offset", f.chunk_lookup_offset, cas_lookup_end),
        (
            "chunk lookup entries",
            f.chunk_lookup_num_entries,
            lookups.chunks.len() as u64,
        ),
        (
            "footer offset",
            f.footer_offset,
            end - SHARD_FOOTER_LEN as u64,
        ),
    ];
    for (what, got, want) in expected {
        if got != want {
            return Err(ShardError::FooterField {
                field: what,
                got,
                want,
            }
            .into());
        }
    }
    Ok(())
}

impl ParsedShard {
    /// Problems with the lookup tables: order, counts, and whether each entry points at a
    /// record with the hash it claims. Empty when consistent (or when there are none).
    pub fn lookup_problems(&self) -> Vec<String> {
        let Some(lookups) = &self.lookups else {
            return Vec::new();
        };
        let mut problems = Vec::new();
        let mut file_at = std::collections::HashMap::new();
        let mut index = 0u32;
        for f in &self.shard.files {
            file_at.insert(index, f.file_hash);
            index += f.num_records() as u32;
        }
        let mut xorb_at = std::collections::HashMap::new();
        let mut index = 0u32;
        for x in &self.shard.xorbs {
            xorb_at.insert(index, x);
            index += x.num_records() as u32;
        }
        if !is_sorted(lookups.files.iter().map(|e| e.0)) {
            problems.push("file lookup table is not sorted".into());
        }
        if !is_sorted(lookups.xorbs.iter().map(|e| e.0)) {
            problems.push("CAS lookup table is not sorted".into());
        }
        if !is_sorted(lookups.chunks.iter().map(|e| e.0)) {
            problems.push("chunk lookup table is not sorted".into());
        }
        for (k, (key, idx)) in lookups.files.iter().enumerate() {
            match file_at.get(idx) {
                Some(h) if h.truncated() == *key => {}
                _ => problems.push(format!(
                    "file lookup entry {k} ({key:#018x} -> {idx}) points at no matching file"
                )),
            }
        }
        for (k, (key, idx)) in lookups.xorbs.iter().enumerate() {
            match xorb_at.get(idx) {
                Some(x) if x.xorb_hash.truncated() == *key => {}
                _ => problems.push(format!(
                    "CAS lookup entry {k} ({key:#018x} -> {idx}) points at no matching xorb"
                )),
            }
        }
        for (k, (key, idx, chunk)) in lookups.chunks.iter().enumerate() {
            let ok = xorb_at
                .get(idx)
                .and_then(|x| x.chunks.get(*chunk as usize))
                .is_some_and(|c| c.chunk_hash.truncated() == *key);
            if !ok {
                problems.push(format!(
                    "chunk lookup entry {k} ({key:#018x} -> {idx}/{chunk}) points at no matching chunk"
                ));
            }
        }
        let files: std::collections::HashSet<u32> = lookups.files.iter().map(|e| e.1).collect();
        if files.len() != self.shard.files.len() {
            problems.push("file lookup table does not cover every file exactly once".into());
        }
        let xorbs: std::collections::HashSet<u32> = lookups.xorbs.iter().map(|e| e.1).collect();
        if xorbs.len() != self.shard.xorbs.len() {
            problems.push("CAS lookup table does not cover every xorb exactly once".into());
        }
        let chunks: std::collections::HashSet<(u32, u32)> =
            lookups.chunks.iter().map(|e| (e.1, e.2)).collect();
        let total: usize = self.shard.xorbs.iter().map(|x| x.chunks.len()).sum();
        if chunks.len() != total {
            problems.push("chunk lookup table does not cover every chunk exactly once".into());
        }
        problems
    }
}

fn is_sorted(keys: impl Iterator<Item = u64>) -> bool {
    keys.collect::<Vec<_>>().is_sorted()
}
