//! Random access to a stored shard through its footer: binary search in the lookup tables,
//! then read just the records needed. This is how a local shard cache answers "do we already
//! have this file / xorb / chunk" without loading whole shards.

use std::io::{Read, Seek, SeekFrom};

use crate::error::{Result, ShardError};
use crate::hash::{keyed_chunk_hash, MerkleHash};
use crate::shard::parse::{decode_footer, read_shard, ParsedShard, Records};
use crate::shard::types::*;

/// A chunk lookup entry: (first word of the stored chunk hash, record index of the xorb's
/// header in the CAS section, chunk index in the xorb).
pub type ChunkLookupEntry = (u64, u32, u32);

/// A stored shard opened for lookups.
pub struct ShardFile<R: Read + Seek> {
    reader: R,
    footer: ShardFooter,
}

fn seek_err(e: std::io::Error) -> ShardError {
    ShardError::read("seek", &e)
}

impl<R: Read + Seek> ShardFile<R> {
    /// Reads and checks the header and footer; the sections are read on demand.
    pub fn open(mut reader: R) -> Result<Self> {
        let len = reader.seek(SeekFrom::End(0)).map_err(seek_err)?;
        let min = (SHARD_HEADER_LEN + 2 * SHARD_RECORD_LEN + SHARD_FOOTER_LEN) as u64;
        if len < min {
            return Err(ShardError::TooShort { len }.into());
        }
        reader.seek(SeekFrom::Start(0)).map_err(seek_err)?;
        let mut header = [0u8; SHARD_HEADER_LEN];
        reader
            .read_exact(&mut header)
            .map_err(|e| ShardError::read("reading header", &e))?;
        if header[14..32] != SHARD_HEADER_TAG[14..32] {
            return Err(ShardError::NotAShard.into());
        }
        let version = u64::from_le_bytes(header[32..40].try_into().expect("8 bytes"));
        let footer_size = u64::from_le_bytes(header[40..48].try_into().expect("8 bytes"));
        if version != SHARD_HEADER_VERSION {
            return Err(ShardError::Version {
                part: "header",
                got: version,
                expected: SHARD_HEADER_VERSION,
            }
            .into());
        }
        if footer_size != SHARD_FOOTER_LEN as u64 {
            return Err(ShardError::NoFooter.into());
        }
        reader
            .seek(SeekFrom::Start(len - SHARD_FOOTER_LEN as u64))
            .map_err(seek_err)?;
        let mut raw = [0u8; SHARD_FOOTER_LEN];
        reader
            .read_exact(&mut raw)
            .map_err(|e| ShardError::read("reading footer", &e))?;
        let footer = decode_footer(&raw);
        let f = &footer;
        let in_order = f.version == SHARD_FOOTER_VERSION
            && f.file_info_offset == SHARD_HEADER_LEN as u64
            && f.file_info_offset < f.cas_info_offset
            && f.cas_info_offset < f.file_lookup_offset
            && f.file_lookup_num_entries
                .checked_mul(12)
                .and_then(|n| f.file_lookup_offset.checked_add(n))
                == Some(f.cas_lookup_offset)
            && f.cas_lookup_num_entries
                .checked_mul(12)
                .and_then(|n| f.cas_lookup_offset.checked_add(n))
                == Some(f.chunk_lookup_offset)
            && f.chunk_lookup_num_entries
                .checked_mul(16)
                .and_then(|n| f.chunk_lookup_offset.checked_add(n))
                == Some(f.footer_offset)
            && f.footer_offset == len - SHARD_FOOTER_LEN as u64;
        if !in_order {
            return Err(ShardError::FooterOffsets.into());
        }
        Ok(ShardFile { reader, footer })
    }

    pub fn footer(&self) -> &ShardFooter {
        &self.footer
    }

    /// Reads the whole shard front to back.
    pub fn read_all(&mut self) -> Result<ParsedShard> {
        self.seek(0)?;
        read_shard(&mut self.reader)
    }

    fn seek(&mut self, pos: u64) -> Result<()> {
        self.reader.seek(SeekFrom::Start(pos)).map_err(seek_err)?;
        Ok(())
    }

    fn read_array<const N: usize>(&mut self, pos: u64) -> Result<[u8; N]> {
        self.seek(pos)?;
        let mut buf = [0u8; N];
        self.reader
            .read_exact(&mut buf)
            .map_err(|e| ShardError::read(format!("read at {pos}"), &e))?;
        Ok(buf)
    }

    /// Indices of all entries whose key is `key` in a sorted table of `n` entries of
    /// `width` bytes at `offset`.
    fn search(&mut self, offset: u64, n: u64, width: u64, key: u64) -> Result<Vec<u64>> {
        let (mut lo, mut hi) = (0u64, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let k = u64::from_le_bytes(self.read_array::<8>(offset + mid * width)?);
            if k < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let mut hits = Vec::new();
        let mut i = lo;
        while i < n && u64::from_le_bytes(self.read_array::<8>(offset + i * width)?) == key {
            hits.push(i);
            i += 1;
        }
        Ok(hits)
    }

    fn entry_u32(&mut self, pos: u64) -> Result<u32> {
        Ok(u32::from_le_bytes(self.read_array::<4>(pos)?))
    }

    /// The file with this hash, if the shard has it.
    pub fn file(&mut self, file_hash: &MerkleHash) -> Result<Option<FileInfo>> {
        let f = self.footer.clone();
        for i in self.search(
            f.file_lookup_offset,
            f.file_lookup_num_entries,
            12,
            file_hash.truncated(),
        )? {
            let record = self.entry_u32(f.file_lookup_offset + i * 12 + 8)?;
            self.seek(f.file_info_offset + SHARD_RECORD_LEN as u64 * u64::from(record))?;
            let mut records = Records {
                inner: &mut self.reader,
                pos: 0,
            };
            if let Some(file) = records.file_block()? {
                if file.file_hash == *file_hash {
                    return Ok(Some(file));
                }
            }
        }
        Ok(None)
    }

    /// The xorb with this hash, if the shard describes it.
    pub fn xorb(&mut self, xorb_hash: &MerkleHash) -> Result<Option<XorbBlock>> {
        let f = self.footer.clone();
        for i in self.search(
            f.cas_lookup_offset,
            f.cas_lookup_num_entries,
            12,
            xorb_hash.truncated(),
        )? {
            let record = self.entry_u32(f.cas_lookup_offset + i * 12 + 8)?;
            if let Some(block) = self.xorb_at(record)? {
                if block.xorb_hash == *xorb_hash {
                    return Ok(Some(block));
                }
            }
        }
        Ok(None)
    }

    /// The chunk lookup table, whole, sorted by hash word. Its size was checked against the
    /// file by [`ShardFile::open`].
    pub fn chunk_lookup_table(&mut self) -> Result<Vec<ChunkLookupEntry>> {
        let f = &self.footer;
        let (offset, n) = (f.chunk_lookup_offset, f.chunk_lookup_num_entries);
        let len = usize::try_from(n * 16).map_err(|_| ShardError::LookupTableTooLarge)?;
        self.seek(offset)?;
        let mut raw = vec![0u8; len];
        self.reader.read_exact(&mut raw).map_err(|e| {
            ShardError::read(format!("reading the chunk lookup table at {offset}"), &e)
        })?;
        let word = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes"));
        Ok(raw
            .chunks_exact(16)
            .map(|e| {
                let key = u64::from_le_bytes(e[..8].try_into().expect("8 bytes"));
                (key, word(&e[8..12]), word(&e[12..16]))
            })
            .collect())
    }

    /// The xorb block whose header is record `record` of the CAS section, if one is there.
    pub fn xorb_at(&mut self, record: u32) -> Result<Option<XorbBlock>> {
        let f = &self.footer;
        let pos = f.cas_info_offset + SHARD_RECORD_LEN as u64 * u64::from(record);
        self.seek(pos)?;
        Records {
            inner: &mut self.reader,
            pos,
        }
        .xorb_block()
    }

    /// Where a chunk is stored: (xorb hash, chunk index) for every xorb holding it. The hash
    /// is the plain chunk hash; for a keyed shard (a global-dedup response) it is keyed here.
    pub fn chunk(&mut self, chunk_hash: &MerkleHash) -> Result<Vec<(MerkleHash, u32)>> {
        let stored = self.stored_chunk_hash(chunk_hash);
        let f = self.footer.clone();
        let mut found = Vec::new();
        for i in self.search(
            f.chunk_lookup_offset,
            f.chunk_lookup_num_entries,
            16,
            stored.truncated(),
        )? {
            let record = self.entry_u32(f.chunk_lookup_offset + i * 16 + 8)?;
            let index = self.entry_u32(f.chunk_lookup_offset + i * 16 + 12)?;
            if let Some(block) = self.xorb_at(record)? {
                if block
                    .chunks
                    .get(index as usize)
                    .is_some_and(|c| c.chunk_hash == stored)
                {
                    found.push((block.xorb_hash, index));
                }
            }
        }
        Ok(found)
    }

    /// The chunk hash as this shard stores it.
    pub fn stored_chunk_hash(&self, chunk_hash: &MerkleHash) -> MerkleHash {
        if self.footer.chunk_hashes_keyed() {
            keyed_chunk_hash(&self.footer.chunk_hash_key, chunk_hash)
        } else {
            *chunk_hash
        }
    }

    /// Longest run of `chunk_hashes` (from the first) stored consecutively in one xorb, as a
    /// term: the number of chunks matched and the term that references them.
    pub fn dedup_query(
        &mut self,
        chunk_hashes: &[MerkleHash],
    ) -> Result<Option<(usize, FileTerm)>> {
        let Some(first) = chunk_hashes.first() else {
            return Ok(None);
        };
        let mut best: Option<(usize, FileTerm)> = None;
        for (xorb_hash, start) in self.chunk(first)? {
            let Some(block) = self.xorb(&xorb_hash)? else {
                continue;
            };
            let mut matched = 0usize;
            let mut bytes = 0u32;
            for (k, query) in chunk_hashes.iter().enumerate() {
                match block.chunks.get(start as usize + k) {
                    Some(c) if c.chunk_hash == self.stored_chunk_hash(query) => {
                        matched += 1;
                        bytes += c.unpacked_bytes;
                    }
                    _ => break,
                }
            }
            if best.as_ref().is_none_or(|(m, _)| matched > *m) {
                best = Some((
                    matched,
                    FileTerm {
                        xorb_hash,
                        cas_flags: 0,
                        unpacked_bytes: bytes,
                        chunk_start: start,
                        chunk_end: start + matched as u32,
                    },
                ));
            }
        }
        Ok(best)
    }
}
