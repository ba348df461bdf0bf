//! Xorbs and shards between a deployment's store and a backup. Objects are immutable and
//! named by content, so a key present in the destination with the right size is not copied
//! again; a new copy's sha256 is computed from the bytes read and recorded in the manifest.

use std::collections::HashMap;

use bytes::{Bytes, BytesMut};
use futures::{FutureExt, StreamExt, TryStreamExt};

use super::{io_err, sha256_hex, BackupError, Dest, ObjectEntry, Progress};
use git_xet_core::MerkleHash;
use git_xet_storage::{ObjectKey, ObjectKind, ObjectStore};

/// Objects copied at once.
const PARALLEL: usize = 4;
/// Bytes read from the store per request.
const PIECE: u64 = 8 * 1024 * 1024;

pub fn dest_key(key: &ObjectKey) -> String {
    let hex = key.hash.to_hex();
    let kind = match key.kind {
        ObjectKind::Xorb => "xorbs",
        ObjectKind::Shard => "shards",
    };
    format!("objects/{kind}/{}/{hex}", &hex[..2])
}

pub fn parse_dest_key(key: &str) -> Option<ObjectKey> {
    let mut parts = key.split('/');
    let (Some("objects"), Some(kind), Some(_), Some(hex), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return None;
    };
    let hash = MerkleHash::from_hex(hex).ok()?;
    match kind {
        "xorbs" => Some(ObjectKey::xorb(hash)),
        "shards" => Some(ObjectKey::shard(hash)),
        _ => None,
    }
}

/// What the destination holds: sizes from a listing, sha256s from earlier manifests.
pub struct DestObjects {
    pub sizes: HashMap<String, u64>,
    pub hashes: HashMap<String, String>,
}

impl DestObjects {
    pub async fn load(dest: &Dest, manifests: &[super::Manifest]) -> Result<Self, BackupError> {
        let sizes = dest
            .list("objects")
            .await
            .map_err(io_err(format!("listing the objects in {dest}")))?
            .into_iter()
            .collect();
        let mut hashes = HashMap::new();
        for m in manifests {
            for o in &m.objects {
                hashes.insert(o.key.clone(), o.sha256.clone());
            }
        }
        Ok(DestObjects { sizes, hashes })
    }
}

/// Reads a whole object from the store in pieces; `None` when it is not there (any more).
async fn read_object(store: &dyn ObjectStore, key: ObjectKey) -> std::io::Result<Option<Bytes>> {
    let Some(len) = store.len(key).await? else {
        return Ok(None);
    };
    let mut buf = BytesMut::with_capacity(len as usize);
    let mut at = 0;
    while at < len {
        let end = (at + PIECE).min(len);
        match store.read_range(key, at..end).await {
            Ok(piece) => buf.extend_from_slice(&piece),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        }
        at = end;
    }
    Ok(Some(buf.freeze()))
}

/// Copies each of `keys` the destination lacks and returns the manifest entry of each one
/// there afterwards. An object gone from the store is skipped, or with `must_exist` an
/// error (the snapshot needs it).
pub async fn copy(
    store: &dyn ObjectStore,
    dest: &Dest,
    have: &mut DestObjects,
    keys: &[ObjectKey],
    must_exist: bool,
    step: &'static str,
) -> Result<(Vec<ObjectEntry>, u64, u64), BackupError> {
    let mut entries = Vec::with_capacity(keys.len());
    let mut missing = Vec::new();
    for key in keys {
        let k = dest_key(key);
        match (have.sizes.get(&k), have.hashes.get(&k)) {
            (Some(&size), Some(sha)) => entries.push(ObjectEntry {
                key: k,
                size,
                sha256: sha.clone(),
            }),
            (size, _) => missing.push((*key, size.copied())),
        }
    }
    let total = missing.len();
    let (mut copied, mut bytes) = (0u64, 0u64);
    let mut progress = Progress::new(step);
    let mut results = futures::stream::iter(missing.into_iter().map(|(key, already)| {
        async move {
            let k = dest_key(&key);
            // There without a recorded hash (an interrupted backup copied it): hash it there.
            if let Some(size) = already {
                let data = dest.get(&k).await.map_err(io_err(format!("reading {k}")))?;
                if data.len() as u64 == size {
                    return Ok(Some((
                        ObjectEntry {
                            sha256: sha256_hex(&data),
                            key: k,
                            size,
                        },
                        false,
                    )));
                }
            }
            let Some(data) = read_object(store, key)
                .await
                .map_err(io_err(format!("reading {k} from the object store")))?
            else {
                return Ok(None);
            };
            let entry = ObjectEntry {
                sha256: sha256_hex(&data),
                key: k.clone(),
                size: data.len() as u64,
            };
            dest.put(&k, data)
                .await
                .map_err(io_err(format!("writing {k} to {dest}")))?;
            Ok::<_, BackupError>(Some((entry, true)))
        }
        .map(move |r| (key, r))
    }))
    .buffer_unordered(PARALLEL);
    let mut done = 0;
    while let Some((key, result)) = results.next().await {
        done += 1;
        match result? {
            Some((entry, fresh)) => {
                if fresh {
                    copied += 1;
                    bytes += entry.size;
                }
                have.sizes.insert(entry.key.clone(), entry.size);
                have.hashes.insert(entry.key.clone(), entry.sha256.clone());
                entries.push(entry);
            }
            None if must_exist => {
                return Err(BackupError::Vanished {
                    key: dest_key(&key),
                })
            }
            None => {}
        }
        progress.tick(|| {
            format!(
                "{done}/{total} objects, {copied} copied ({})",
                git_xet_io::human::human_bytes(bytes)
            )
        });
    }
    Ok((entries, copied, bytes))
}

/// Every object of the store, by key.
pub async fn list_store(store: &dyn ObjectStore) -> Result<Vec<ObjectKey>, BackupError> {
    let mut keys = Vec::new();
    for kind in [ObjectKind::Xorb, ObjectKind::Shard] {
        let listed: Vec<ObjectKey> = store
            .list(kind)
            .map_ok(|info| info.key)
            .try_collect()
            .await
            .map_err(io_err(format!("listing the {kind:?} objects of the store")))?;
        keys.extend(listed);
    }
    Ok(keys)
}
