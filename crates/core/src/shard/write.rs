//! Serializing shards, byte-compatible with the deployed implementation: files and xorbs in
//! hash order (as four u64 words), lookup indices counted in 48-byte records.

use crate::hash::MerkleHash;
use crate::shard::types::*;

/// Footer fields a writer chooses. The defaults are what the deployed client writes for the
/// shards it uploads: no key, timestamp 0, no expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FooterOptions {
    pub chunk_hash_key: MerkleHash,
    pub creation_timestamp: u64,
    pub key_expiry: u64,
}

impl Default for FooterOptions {
    fn default() -> Self {
        FooterOptions {
            chunk_hash_key: MerkleHash::ZERO,
            creation_timestamp: 0,
            key_expiry: u64::MAX,
        }
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_record(out: &mut Vec<u8>, hash: &MerkleHash, words: [u32; 4]) {
    out.extend_from_slice(hash.as_bytes());
    for w in words {
        put_u32(out, w);
    }
}

fn put_bookend(out: &mut Vec<u8>) {
    put_record(out, &MerkleHash::BOOKEND, [0; 4]);
}

impl Shard {
    /// Files and xorbs in the order they are written: sorted by hash, one per hash.
    fn ordered(&self) -> (Vec<&FileInfo>, Vec<&XorbBlock>) {
        let mut files: Vec<&FileInfo> = self.files.iter().collect();
        files.sort_by_key(|f| f.file_hash);
        files.dedup_by(|a, b| a.file_hash == b.file_hash);
        let mut xorbs: Vec<&XorbBlock> = self.xorbs.iter().collect();
        xorbs.sort_by_key(|x| x.xorb_hash);
        xorbs.dedup_by(|a, b| a.xorb_hash == b.xorb_hash);
        (files, xorbs)
    }

    /// The form the upload API takes: header, both sections, no lookup tables or footer.
    pub fn to_upload_bytes(&self) -> Vec<u8> {
        let (files, xorbs) = self.ordered();
        let mut out = Vec::new();
        write_header(&mut out, 0);
        write_files(&mut out, &files);
        write_xorbs(&mut out, &xorbs);
        out
    }

    /// The stored form: with lookup tables and the 200-byte footer.
    pub fn to_stored_bytes(&self, options: &FooterOptions) -> Vec<u8> {
        let (files, xorbs) = self.ordered();
        let mut out = Vec::new();
        write_header(&mut out, SHARD_FOOTER_LEN as u64);
        let file_info_offset = out.len() as u64;
        let file_lookup = write_files(&mut out, &files);
        let cas_info_offset = out.len() as u64;
        let (cas_lookup, chunk_lookup) = write_xorbs(&mut out, &xorbs);

        let file_lookup_offset = out.len() as u64;
        for (key, index) in &file_lookup {
            put_u64(&mut out, *key);
            put_u32(&mut out, *index);
        }
        let cas_lookup_offset = out.len() as u64;
        for (key, index) in &cas_lookup {
            put_u64(&mut out, *key);
            put_u32(&mut out, *index);
        }
        let chunk_lookup_offset = out.len() as u64;
        for (key, xorb_index, chunk_index) in &chunk_lookup {
            put_u64(&mut out, *key);
            put_u32(&mut out, *xorb_index);
            put_u32(&mut out, *chunk_index);
        }

        let footer = ShardFooter {
            version: SHARD_FOOTER_VERSION,
            file_info_offset,
            cas_info_offset,
            file_lookup_offset,
            file_lookup_num_entries: file_lookup.len() as u64,
            cas_lookup_offset,
            cas_lookup_num_entries: cas_lookup.len() as u64,
            chunk_lookup_offset,
            chunk_lookup_num_entries: chunk_lookup.len() as u64,
            chunk_hash_key: options.chunk_hash_key,
            creation_timestamp: options.creation_timestamp,
            key_expiry: options.key_expiry,
            stored_bytes_on_disk: xorbs.iter().map(|x| u64::from(x.num_bytes_on_disk)).sum(),
            materialized_bytes: files.iter().map(|f| f.size()).sum(),
            stored_bytes: xorbs.iter().map(|x| u64::from(x.num_bytes_in_xorb)).sum(),
            footer_offset: out.len() as u64,
        };
        write_footer(&mut out, &footer);
        out
    }
}

fn write_header(out: &mut Vec<u8>, footer_size: u64) {
    out.extend_from_slice(&SHARD_HEADER_TAG);
    put_u64(out, SHARD_HEADER_VERSION);
    put_u64(out, footer_size);
}

/// Writes the file info section; returns the file lookup table (already in key order, since
/// files are sorted by hash and the key is the hash's first word).
fn write_files(out: &mut Vec<u8>, files: &[&FileInfo]) -> Vec<(u64, u32)> {
    let mut lookup = Vec::with_capacity(files.len());
    let mut index = 0u32;
    for file in files {
        lookup.push((file.file_hash.truncated(), index));
        put_record(
            out,
            &file.file_hash,
            [file.flags(), file.terms.len() as u32, 0, 0],
        );
        for t in &file.terms {
            put_record(
                out,
                &t.xorb_hash,
                [t.cas_flags, t.unpacked_bytes, t.chunk_start, t.chunk_end],
            );
        }
        if let Some(verification) = &file.verification {
            for hash in verification {
                put_record(out, hash, [0; 4]);
            }
        }
        if let Some(sha256) = &file.sha256 {
            put_record(out, sha256, [0; 4]);
        }
        index += file.num_records() as u32;
    }
    put_bookend(out);
    lookup
}

type CasLookup = Vec<(u64, u32)>;
type ChunkLookup = Vec<(u64, u32, u32)>;

/// Writes the CAS info section; returns the CAS and chunk lookup tables.
fn write_xorbs(out: &mut Vec<u8>, xorbs: &[&XorbBlock]) -> (CasLookup, ChunkLookup) {
    let mut cas_lookup = Vec::with_capacity(xorbs.len());
    let mut chunk_lookup = Vec::new();
    let mut index = 0u32;
    for xorb in xorbs {
        cas_lookup.push((xorb.xorb_hash.truncated(), index));
        put_record(
            out,
            &xorb.xorb_hash,
            [
                xorb.cas_flags,
                xorb.chunks.len() as u32,
                xorb.num_bytes_in_xorb,
                xorb.num_bytes_on_disk,
            ],
        );
        for (i, c) in xorb.chunks.iter().enumerate() {
            put_record(
                out,
                &c.chunk_hash,
                [c.byte_range_start, c.unpacked_bytes, c.flags, 0],
            );
            chunk_lookup.push((c.chunk_hash.truncated(), index, i as u32));
        }
        index += xorb.num_records() as u32;
    }
    put_bookend(out);
    chunk_lookup.sort_by_key(|&(key, _, _)| key);
    (cas_lookup, chunk_lookup)
}

fn write_footer(out: &mut Vec<u8>, f: &ShardFooter) {
    let start = out.len();
    for v in [
        f.version,
        f.file_info_offset,
        f.cas_info_offset,
        f.file_lookup_offset,
        f.file_lookup_num_entries,
        f.cas_lookup_offset,
        f.cas_lookup_num_entries,
        f.chunk_lookup_offset,
        f.chunk_lookup_num_entries,
    ] {
        put_u64(out, v);
    }
    out.extend_from_slice(f.chunk_hash_key.as_bytes());
    put_u64(out, f.creation_timestamp);
    put_u64(out, f.key_expiry);
    out.extend_from_slice(&[0u8; 48]);
    put_u64(out, f.stored_bytes_on_disk);
    put_u64(out, f.materialized_bytes);
    put_u64(out, f.stored_bytes);
    put_u64(out, f.footer_offset);
    debug_assert_eq!(out.len() - start, SHARD_FOOTER_LEN);
}
