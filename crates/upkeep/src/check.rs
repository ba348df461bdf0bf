//! `git xet server check`: every registered file can be rebuilt from stored xorbs (each
//! term's xorb is indexed and stored at its indexed size, its chunk range inside the xorb's
//! layout, the term sizes adding up to the file's). With `read_data`, every stored xorb is
//! read and verified (records, chunk hashes, xorb hash), and every file is rebuilt from the
//! bytes: its file hash recomputed from the chunks and its sha256 compared with every
//! repository's claim. Like restic's `check`: it reports, it repairs nothing.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::Digest;

use crate::gc::{listing, on_index, store_err, UpkeepError};
use git_xet_core::hash::{chunk_hash, file_hash, sha256_hex};
use git_xet_core::xorb::{validate_xorb, ChunkRecords, XorbFooter};
use git_xet_core::MerkleHash;
use git_xet_index::RepoName;
use git_xet_index::{FileRecord, Index};
use git_xet_storage::{ObjectKey, ObjectKind, ObjectStore};

/// Files read from the index at a time.
const PAGE: usize = 1000;

/// One thing wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// An indexed xorb has no stored object.
    XorbMissing { xorb: MerkleHash },
    /// The stored object's size is not the indexed one.
    XorbSize {
        xorb: MerkleHash,
        indexed: u64,
        stored: u64,
    },
    /// The stored xorb is another valid layout than the indexed one (its records end
    /// elsewhere): files using it cannot be served. Uploading the xorb again repairs it.
    XorbLayout { xorb: MerkleHash },
    /// Reading the stored xorb found it corrupt.
    XorbCorrupt { xorb: MerkleHash, reason: String },
    /// A file's term names a xorb the index does not know.
    TermXorbUnknown {
        file: MerkleHash,
        term: usize,
        xorb: MerkleHash,
    },
    /// A file's term lies outside its xorb's chunks.
    TermRange {
        file: MerkleHash,
        term: usize,
        xorb: MerkleHash,
    },
    /// The terms do not add up to the file's size.
    FileSize {
        file: MerkleHash,
        recorded: u64,
        actual: u64,
    },
    /// The chunks rebuilt do not hash to the file hash.
    FileHash {
        file: MerkleHash,
        actual: MerkleHash,
    },
    /// A lock file of a hosted git repository that no running git owns (left by a git that
    /// was killed or crashed); the next push to the repository removes it.
    StaleGitLock { path: PathBuf },
    /// A sha256 recorded for the file is not its content's.
    Sha256 {
        file: MerkleHash,
        /// The repository that claimed it; `None` for the file's own record.
        repo: Option<RepoName>,
        claimed: [u8; 32],
        actual: [u8; 32],
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::XorbMissing { xorb } => write!(f, "xorb {xorb}: indexed but not stored"),
            Problem::XorbSize {
                xorb,
                indexed,
                stored,
            } => write!(
                f,
                "xorb {xorb}: stored object has {stored} bytes, the index says {indexed}"
            ),
            Problem::XorbLayout { xorb } => write!(
                f,
                "xorb {xorb}: the index describes another layout than the stored one (upload the xorb again to repair)"
            ),
            Problem::XorbCorrupt { xorb, reason } => write!(f, "xorb {xorb}: corrupt: {reason}"),
            Problem::TermXorbUnknown { file, term, xorb } => {
                write!(f, "file {file} term {term}: xorb {xorb} is not indexed")
            }
            Problem::TermRange { file, term, xorb } => write!(
                f,
                "file {file} term {term}: chunk range is outside xorb {xorb} or its size is wrong"
            ),
            Problem::FileSize {
                file,
                recorded,
                actual,
            } => write!(
                f,
                "file {file}: recorded size {recorded}, terms hold {actual}"
            ),
            Problem::FileHash { file, actual } => {
                write!(f, "file {file}: its chunks hash to {actual}")
            }
            Problem::StaleGitLock { path } => write!(
                f,
                "git lock file {}: no git runs in the repository to own it (left by a \
                 killed or crashed git); the next push removes it",
                path.display()
            ),
            Problem::Sha256 {
                file,
                repo,
                claimed,
                actual,
            } => {
                let whose = match repo {
                    Some(repo) => format!("repository {repo} claims"),
                    None => "the file record says".to_string(),
                };
                write!(
                    f,
                    "file {file}: {whose} sha256 {}, the content's is {}",
                    sha256_hex(claimed),
                    sha256_hex(actual)
                )
            }
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    pub files: u64,
    pub xorbs: u64,
    pub xorbs_read: u64,
    pub bytes_read: u64,
    pub problems: Vec<Problem>,
}

/// The stale lock files of the hosted git repositories under `root` (see
/// [`git_xet_deployment::repos::hosted`]), and how many repositories were looked at. A repository a push is
/// writing right now is passed over: its lock files may be live.
pub fn git_locks(root: &Path) -> std::io::Result<(u64, Vec<Problem>)> {
    let repos = git_xet_deployment::repos::hosted(root)?;
    let mut problems = Vec::new();
    for repo in &repos {
        let stale = git_xet_deployment::writers::stale_lock_files(&repo.dir)?;
        problems.extend(
            stale
                .unwrap_or_default()
                .into_iter()
                .map(|path| Problem::StaleGitLock { path }),
        );
    }
    Ok((repos.len() as u64, problems))
}

pub async fn check(
    store: &dyn ObjectStore,
    index: &Arc<dyn Index>,
    read_data: bool,
) -> Result<CheckReport, UpkeepError> {
    let mut report = CheckReport::default();
    let stored = listing(store, ObjectKind::Xorb).await?;
    let indexed = on_index(index, |i| i.indexed_xorbs()).await?;
    let condemned: HashSet<MerkleHash> = on_index(index, |i| i.condemned_xorbs())
        .await?
        .into_iter()
        .collect();
    report.xorbs = indexed.len() as u64;
    for x in indexed.iter().filter(|x| !condemned.contains(&x.hash)) {
        match stored.get(&x.hash) {
            None => report.problems.push(Problem::XorbMissing { xorb: x.hash }),
            Some(info) if info.len != x.stored_len => report.problems.push(Problem::XorbSize {
                xorb: x.hash,
                indexed: x.stored_len,
                stored: info.len,
            }),
            Some(_) => {}
        }
    }
    // Xorbs whose stored bytes were verified (`read_data`), and those found corrupt.
    let mut bad: HashSet<MerkleHash> = report
        .problems
        .iter()
        .filter_map(|p| match p {
            Problem::XorbMissing { xorb } | Problem::XorbSize { xorb, .. } => Some(*xorb),
            _ => None,
        })
        .collect();
    if read_data {
        for info in stored.values() {
            let hash = info.key.hash;
            let bytes = store
                .read_range(info.key, 0..info.len)
                .await
                .map_err(store_err(format!("reading xorb {hash}")))?;
            report.xorbs_read += 1;
            report.bytes_read += info.len;
            let verdict = validate_xorb(&bytes)
                .map_err(|e| e.to_string())
                .and_then(|f| {
                    if f.hash == hash {
                        Ok(f)
                    } else {
                        Err(format!("its content is xorb {}", f.hash))
                    }
                });
            match verdict {
                Err(reason) => {
                    bad.insert(hash);
                    report
                        .problems
                        .push(Problem::XorbCorrupt { xorb: hash, reason });
                }
                Ok(footer) if !bad.contains(&hash) => {
                    let meta = on_index(index, move |i| i.xorb(&hash)).await?;
                    if meta.is_some_and(|m| m.footer.chunk_ends != footer.chunk_ends) {
                        bad.insert(hash);
                        report.problems.push(Problem::XorbLayout { xorb: hash });
                    }
                }
                Ok(_) => {}
            }
        }
    }
    let mut after: Option<MerkleHash> = None;
    let mut cache = XorbCache::default();
    loop {
        let from = after;
        let page = on_index(index, move |i| i.files_page(from.as_ref(), PAGE)).await?;
        let Some(last) = page.last() else { break };
        after = Some(last.file_hash);
        for file in page {
            report.files += 1;
            let usable = check_terms(index, &file, &bad, &mut report.problems).await?;
            if read_data && usable {
                rebuild(store, index, &file, &mut cache, &mut report.problems).await?;
            }
        }
    }
    Ok(report)
}

/// Checks a file's terms against the index; returns whether its xorbs are all usable.
async fn check_terms(
    index: &Arc<dyn Index>,
    file: &FileRecord,
    bad: &HashSet<MerkleHash>,
    problems: &mut Vec<Problem>,
) -> Result<bool, UpkeepError> {
    let mut usable = true;
    let mut size = 0u64;
    for (i, term) in file.terms.iter().enumerate() {
        let hash = term.xorb_hash;
        let Some(meta) = on_index(index, move |ix| ix.xorb(&hash)).await? else {
            problems.push(Problem::TermXorbUnknown {
                file: file.file_hash,
                term: i,
                xorb: hash,
            });
            usable = false;
            continue;
        };
        usable &= !bad.contains(&hash);
        let inside = term.chunk_start < term.chunk_end
            && term.chunk_end as usize <= meta.num_chunks()
            && meta
                .chunks(term.chunk_start, term.chunk_end)
                .map(|(_, n)| n)
                .sum::<u64>()
                == u64::from(term.unpacked_bytes);
        if !inside {
            problems.push(Problem::TermRange {
                file: file.file_hash,
                term: i,
                xorb: hash,
            });
            usable = false;
        }
        size += u64::from(term.unpacked_bytes);
    }
    if size != file.size {
        problems.push(Problem::FileSize {
            file: file.file_hash,
            recorded: file.size,
            actual: size,
        });
    }
    Ok(usable)
}

/// The last few xorbs read (files often share them).
#[derive(Default)]
struct XorbCache {
    map: HashMap<MerkleHash, Arc<(bytes::Bytes, XorbFooter)>>,
}

impl XorbCache {
    async fn get(
        &mut self,
        store: &dyn ObjectStore,
        hash: MerkleHash,
        len: u64,
    ) -> Result<Arc<(bytes::Bytes, XorbFooter)>, UpkeepError> {
        if let Some(x) = self.map.get(&hash) {
            return Ok(x.clone());
        }
        let bytes = store
            .read_range(ObjectKey::xorb(hash), 0..len)
            .await
            .map_err(store_err(format!("reading xorb {hash}")))?;
        let footer = XorbFooter::parse(&bytes).map_err(|e| UpkeepError::Store {
            context: format!("xorb {hash}"),
            source: std::io::Error::other(e.to_string()),
        })?;
        if self.map.len() >= 4 {
            self.map.clear();
        }
        let entry = Arc::new((bytes, footer));
        self.map.insert(hash, entry.clone());
        Ok(entry)
    }
}

/// Rebuilds a file from its (verified) xorbs: file hash and sha256 claims.
async fn rebuild(
    store: &dyn ObjectStore,
    index: &Arc<dyn Index>,
    file: &FileRecord,
    cache: &mut XorbCache,
    problems: &mut Vec<Problem>,
) -> Result<(), UpkeepError> {
    let mut sha = sha2::Sha256::new();
    let mut chunks = Vec::new();
    let mut out = Vec::new();
    for term in &file.terms {
        let hash = term.xorb_hash;
        let Some(meta) = on_index(index, move |ix| ix.xorb(&hash)).await? else {
            return Ok(());
        };
        let xorb = cache.get(store, hash, meta.stored_len).await?;
        let (bytes, footer) = &*xorb;
        let records = ChunkRecords::new(&bytes[..footer.data_len()]);
        for (k, record) in records.enumerate().take(term.chunk_end as usize) {
            if k < term.chunk_start as usize {
                continue;
            }
            out.clear();
            // Verified above: a record that fails now is a read error, not a finding.
            record
                .and_then(|r| r.decode_into(&mut out))
                .map_err(|e| UpkeepError::Store {
                    context: format!("decoding xorb {hash} chunk {k}"),
                    source: std::io::Error::other(e.to_string()),
                })?;
            chunks.push((chunk_hash(&out), out.len() as u64));
            sha.update(&out);
        }
    }
    let actual = file_hash(chunks);
    if actual != file.file_hash {
        problems.push(Problem::FileHash {
            file: file.file_hash,
            actual,
        });
        return Ok(());
    }
    let actual: [u8; 32] = sha.finalize().into();
    if file.sha256 != actual {
        problems.push(Problem::Sha256 {
            file: file.file_hash,
            repo: None,
            claimed: file.sha256,
            actual,
        });
    }
    let hash = file.file_hash;
    for claim in on_index(index, move |i| i.sha256_claims(&hash)).await? {
        if claim.sha256 != actual {
            problems.push(Problem::Sha256 {
                file: file.file_hash,
                repo: Some(claim.repo),
                claimed: claim.sha256,
                actual,
            });
        }
    }
    Ok(())
}
