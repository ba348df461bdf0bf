//! A file's content rebuilt from stored xorbs and hashed: how `index rebuild` settles a
//! repository's sha256 claim (an LFS pointer's oid) before it makes the file visible there.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use sha2::Digest;

use crate::gc::{on_index, store_err, UpkeepError};
use git_xet_core::shard::FileTerm;
use git_xet_core::xorb::ChunkRecords;
use git_xet_core::MerkleHash;
use git_xet_index::{Index, XorbMeta};
use git_xet_storage::{ObjectKey, ObjectStore};

/// Term ranges remembered (files of one upload often share a xorb's neighbouring ranges,
/// and the same file is often claimed by several repositories).
const CACHED_LAYOUTS: usize = 256;

/// What hashing a file's content found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// The content's sha256 and size.
    Hashed { sha256: [u8; 32], size: u64 },
    /// It cannot be rebuilt: a xorb is missing, a range lies outside it, a record is corrupt.
    Unreadable(String),
}

/// Rebuilds files' content; remembers xorb layouts it asked the index for.
pub struct Hasher<'a> {
    store: &'a dyn ObjectStore,
    index: &'a Arc<dyn Index>,
    layouts: HashMap<MerkleHash, Option<Arc<XorbMeta>>>,
    pub bytes_read: u64,
}

impl<'a> Hasher<'a> {
    pub fn new(store: &'a dyn ObjectStore, index: &'a Arc<dyn Index>) -> Hasher<'a> {
        Hasher {
            store,
            index,
            layouts: HashMap::new(),
            bytes_read: 0,
        }
    }

    /// The indexed layout of a xorb (`None` when it is not indexed).
    pub async fn layout(&mut self, hash: MerkleHash) -> Result<Option<Arc<XorbMeta>>, UpkeepError> {
        if let Some(found) = self.layouts.get(&hash) {
            return Ok(found.clone());
        }
        let found = on_index(self.index, move |i| i.xorb(&hash)).await?;
        if self.layouts.len() >= CACHED_LAYOUTS {
            self.layouts.clear();
        }
        self.layouts.insert(hash, found.clone());
        Ok(found)
    }

    /// Whether every term lies inside an indexed xorb (what registration needs).
    pub async fn terms_usable(
        &mut self,
        terms: &[FileTerm],
    ) -> Result<Option<String>, UpkeepError> {
        for (i, term) in terms.iter().enumerate() {
            let Some(meta) = self.layout(term.xorb_hash).await? else {
                return Ok(Some(format!(
                    "term {i}: xorb {} is not stored",
                    term.xorb_hash
                )));
            };
            if term.chunk_start >= term.chunk_end || term.chunk_end as usize > meta.num_chunks() {
                return Ok(Some(format!(
                    "term {i}: chunks {}..{} are outside xorb {}",
                    term.chunk_start, term.chunk_end, term.xorb_hash
                )));
            }
        }
        Ok(None)
    }

    /// Reads the terms' chunk records from the store, decodes them and hashes the content.
    pub async fn hash(&mut self, terms: &[FileTerm]) -> Result<Content, UpkeepError> {
        if let Some(why) = self.terms_usable(terms).await? {
            return Ok(Content::Unreadable(why));
        }
        let mut sha = sha2::Sha256::new();
        let mut size = 0u64;
        let mut out = Vec::new();
        for (i, term) in terms.iter().enumerate() {
            let meta = self
                .layout(term.xorb_hash)
                .await?
                .expect("checked by terms_usable");
            let (start, end) = (term.chunk_start as usize, term.chunk_end as usize);
            let range = meta.footer.records_range(start, end);
            let key = ObjectKey::xorb(term.xorb_hash);
            let bytes: Bytes = match self
                .store
                .read_range(key, range.start as u64..range.end as u64)
                .await
            {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Ok(Content::Unreadable(format!(
                        "term {i}: xorb {} is indexed but not stored",
                        term.xorb_hash
                    )))
                }
                Err(e) => {
                    return Err(store_err(format!("reading xorb {}", term.xorb_hash))(e));
                }
            };
            self.bytes_read += bytes.len() as u64;
            let mut records = ChunkRecords::new(&bytes);
            for k in start..end {
                out.clear();
                let decoded = match records.next() {
                    Some(record) => record.and_then(|r| r.decode_into(&mut out)),
                    None => {
                        return Ok(Content::Unreadable(format!(
                            "xorb {} ends before chunk {k}",
                            term.xorb_hash
                        )))
                    }
                };
                if let Err(e) = decoded {
                    return Ok(Content::Unreadable(format!(
                        "xorb {} chunk {k}: {e}",
                        term.xorb_hash
                    )));
                }
                sha.update(&out);
                size += out.len() as u64;
            }
        }
        Ok(Content::Hashed {
            sha256: sha.finalize().into(),
            size,
        })
    }
}
