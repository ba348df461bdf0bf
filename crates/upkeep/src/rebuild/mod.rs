//! `git xet server index rebuild`: the index brought back from the two sources of truth, the
//! object store and the hosted git repositories (docs/server-operations.md, "Index rebuild").
//!
//! 1. Every stored xorb is indexed from its own footer (its layout as stored).
//! 2. Every stored shard is read: its files (terms, sha256 claim) become candidates.
//! 3. Every hosted repository's history (all refs) is read for LFS pointers. A pointer's
//!    oid picks the candidate files claiming that sha256; each candidate is rebuilt from its
//!    xorbs and hashed, and the first whose content has that sha256 and the pointer's size is
//!    registered for the repository (as the shard it came from, so that gc keeps the shard),
//!    its sha256 recorded as verified. A false claim (another repository's, say) is never
//!    attributed: the live index keeps claims per repository for the same reason.
//! 4. Each repository's visibility comes from its own config (`xet.private`); without a
//!    record it is made private.
//!
//! What the index held that neither source has (tokens and revocations, locks, files uploaded
//! but not yet pushed) is not brought back; the command that drives this
//! (src/bin/git-xet-server/index_rebuild.rs) decides how each fails closed.

pub mod compare;
pub mod content;
pub mod repos;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};

use crate::gc::{on_index, store_err, UpkeepError};
use content::{Content, Hasher};
use git_xet_core::hash::{merkle_as_sha256, sha256_hex};
use git_xet_core::shard::read_shard;
use git_xet_core::xorb::XorbFooter;
use git_xet_core::MerkleHash;
use git_xet_index::RepoName;
use git_xet_index::{DedupScope, FileRecord, Index, ShardRegistration, XorbMeta};
use git_xet_storage::{ObjectKind, ObjectStore};
use repos::Visibility;

/// Objects read from the store at once (S3 round trips overlap).
const PARALLEL_READS: usize = 8;

#[derive(Debug, Clone, Copy)]
pub struct RebuildOptions {
    /// The servers' `--dedup-scope`: the domain each registration is made in.
    pub dedup_scope: DedupScope,
    /// Rebuild and hash every file before attributing it (`false`: only where several stored
    /// files claim one sha256; the servers then check each claim on its first download, as
    /// they do for every uploaded claim).
    pub verify_sha256: bool,
    /// Progress lines on stderr.
    pub progress: bool,
}

/// Something the sources hold that could not be brought back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// A stored object that is not what its key says, or cannot be read.
    BadObject { key: String, reason: String },
    /// A repository's pointer names an object no stored shard describes with that content.
    Unresolved {
        repo: RepoName,
        oid: [u8; 32],
        size: u64,
        reason: String,
    },
    /// A repository's git history could not be read.
    BadRepo { repo: RepoName, reason: String },
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Finding::BadObject { key, reason } => write!(f, "{key}: {reason}"),
            Finding::Unresolved {
                repo,
                oid,
                size,
                reason,
            } => write!(
                f,
                "{repo}: LFS object {} ({size} bytes) is not restored: {reason}",
                sha256_hex(oid)
            ),
            Finding::BadRepo { repo, reason } => write!(f, "{repo}: {reason}"),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct RebuildReport {
    pub xorbs: u64,
    pub xorb_bytes: u64,
    pub shards: u64,
    pub repos: u64,
    pub pointers: u64,
    /// Distinct files registered (in one repository or more).
    pub files: u64,
    /// Repository-file visibilities registered.
    pub repo_files: u64,
    /// Files rebuilt and hashed, and their bytes.
    pub files_hashed: u64,
    pub bytes_hashed: u64,
    pub private_repos: Vec<RepoName>,
    /// Private because nothing was recorded.
    pub unknown_visibility: Vec<RepoName>,
    pub findings: Vec<Finding>,
}

/// A file a stored shard describes.
struct Candidate {
    record: FileRecord,
    shard: MerkleHash,
}

/// Prints a progress line at most every few seconds.
struct Progress {
    on: bool,
    last: Instant,
}

impl Progress {
    fn tick(&mut self, line: impl FnOnce() -> String) {
        if self.on && self.last.elapsed() >= Duration::from_secs(2) {
            self.last = Instant::now();
            eprintln!("{}", line());
        }
    }

    fn done(&self, line: String) {
        if self.on {
            eprintln!("{line}");
        }
    }
}

/// Rebuilds `index` (empty: the caller checked) from `store` and the repositories under
/// `git_root`.
pub async fn rebuild(
    store: &dyn ObjectStore,
    index: &Arc<dyn Index>,
    git_root: &std::path::Path,
    options: RebuildOptions,
) -> Result<RebuildReport, UpkeepError> {
    let mut report = RebuildReport::default();
    let mut progress = Progress {
        on: options.progress,
        last: Instant::now(),
    };
    index_xorbs(store, index, &mut report, &mut progress).await?;
    let (candidates, shard_lens) = read_shards(store, &mut report, &mut progress).await?;
    let hosted = git_xet_deployment::repos::hosted(git_root).map_err(store_err(format!(
        "listing the git repositories in {}",
        git_root.display()
    )))?;
    let mut hasher = Hasher::new(store, index);
    // file hash -> its content's sha256 and size, once hashed.
    let mut hashed: HashMap<MerkleHash, Content> = HashMap::new();
    let mut registered: HashSet<MerkleHash> = HashSet::new();
    for repo in hosted {
        report.repos += 1;
        let visibility = repos::visibility(&repo.dir)
            .map_err(store_err(format!("reading {}", repo.dir.display())))?;
        if visibility.private() {
            report.private_repos.push(repo.name.clone());
            if visibility == Visibility::Unknown {
                report.unknown_visibility.push(repo.name.clone());
            }
        }
        let (name, private) = (repo.name.clone(), visibility.private());
        on_index(index, move |i| i.set_repo_private(&name, private)).await?;
        let dir = repo.dir.clone();
        let pointers = match tokio::task::spawn_blocking(move || repos::pointers(&dir))
            .await
            .map_err(|e| UpkeepError::Task(e.to_string()))?
        {
            Ok(pointers) => pointers,
            Err(e) => {
                report.findings.push(Finding::BadRepo {
                    repo: repo.name.clone(),
                    reason: e.to_string(),
                });
                continue;
            }
        };
        // Source shard -> the files of this repository it describes.
        let mut by_shard: BTreeMap<[u8; 32], Vec<FileRecord>> = BTreeMap::new();
        let mut registered_here = HashSet::new();
        for pointer in pointers {
            report.pointers += 1;
            let oid = pointer.oid.0;
            let chosen = choose(
                candidates.get(&oid).map(Vec::as_slice).unwrap_or_default(),
                oid,
                pointer.size,
                options.verify_sha256,
                &mut hasher,
                &mut hashed,
                &mut report,
            )
            .await?;
            match chosen {
                Ok(c) if !registered_here.insert(c.record.file_hash) => {}
                Ok(c) => by_shard
                    .entry(*c.shard.as_bytes())
                    .or_default()
                    .push(c.record.clone()),
                Err(reason) => report.findings.push(Finding::Unresolved {
                    repo: repo.name.clone(),
                    oid,
                    size: pointer.size,
                    reason,
                }),
            }
            progress.tick(|| {
                format!(
                    "repositories: {} ({}), pointers {}, files hashed {} ({} MB)",
                    report.repos,
                    repo.name,
                    report.pointers,
                    report.files_hashed,
                    report.bytes_hashed / 1_000_000
                )
            });
        }
        for (shard, files) in by_shard {
            let shard = MerkleHash::from_bytes(shard);
            let registration = registration(
                &mut hasher,
                shard,
                shard_lens.get(&shard).copied().unwrap_or(0),
                &repo.name,
                options.dedup_scope,
                files,
            )
            .await?;
            report.repo_files += registration.files.len() as u64;
            registered.extend(registration.files.iter().map(|f| f.file_hash));
            let outcome = on_index(index, move |i| i.register_shard(&registration)).await?;
            report.files += outcome.new_files;
        }
    }
    // What was hashed is recorded, so the servers need not hash it again on first download.
    for (file, content) in hashed {
        if let (Content::Hashed { sha256, .. }, true) = (content, registered.contains(&file)) {
            on_index(index, move |i| i.record_verified_sha256(&file, &sha256)).await?;
        }
    }
    progress.done(format!(
        "repositories: {}, pointers {}, files registered {}, hashed {} ({} MB)",
        report.repos,
        report.pointers,
        report.files,
        report.files_hashed,
        report.bytes_hashed / 1_000_000
    ));
    Ok(report)
}

/// Indexes every stored xorb from its footer.
async fn index_xorbs(
    store: &dyn ObjectStore,
    index: &Arc<dyn Index>,
    report: &mut RebuildReport,
    progress: &mut Progress,
) -> Result<(), UpkeepError> {
    let listed: Vec<_> = store
        .list(ObjectKind::Xorb)
        .try_collect()
        .await
        .map_err(store_err("listing xorbs"))?;
    let total = listed.len();
    let mut tails = futures::stream::iter(listed.into_iter().map(|info| async move {
        let tail = store.read_tail(info.key, XorbFooter::MAX_TAIL as u64).await;
        (info, tail)
    }))
    .buffer_unordered(PARALLEL_READS);
    while let Some((info, tail)) = tails.next().await {
        let hash = info.key.hash;
        let tail = tail.map_err(store_err(format!("reading xorb {hash}")))?;
        let footer = match XorbFooter::parse_tail(&tail.bytes, tail.len) {
            Ok(footer) if footer.hash == hash => footer,
            Ok(footer) => {
                report.findings.push(Finding::BadObject {
                    key: format!("xorb {hash}"),
                    reason: format!("its footer is xorb {}'s", footer.hash),
                });
                continue;
            }
            Err(e) => {
                report.findings.push(Finding::BadObject {
                    key: format!("xorb {hash}"),
                    reason: format!("unreadable footer: {e}"),
                });
                continue;
            }
        };
        let meta = XorbMeta {
            footer,
            stored_len: tail.len,
        };
        on_index(index, move |i| i.register_xorb(&meta)).await?;
        report.xorbs += 1;
        report.xorb_bytes += tail.len;
        progress.tick(|| format!("xorbs indexed: {} of {total}", report.xorbs));
    }
    progress.done(format!(
        "xorbs indexed: {} ({} MB)",
        report.xorbs,
        report.xorb_bytes / 1_000_000
    ));
    Ok(())
}

type Candidates = HashMap<[u8; 32], Vec<Candidate>>;

/// The files every stored shard describes, by claimed sha256, and each shard's size.
async fn read_shards(
    store: &dyn ObjectStore,
    report: &mut RebuildReport,
    progress: &mut Progress,
) -> Result<(Candidates, HashMap<MerkleHash, u64>), UpkeepError> {
    let listed: Vec<_> = store
        .list(ObjectKind::Shard)
        .try_collect()
        .await
        .map_err(store_err("listing shards"))?;
    let mut candidates: Candidates = HashMap::new();
    let mut lens = HashMap::new();
    let mut reads = futures::stream::iter(listed.into_iter().map(|info| async move {
        let bytes = store.read_range(info.key, 0..info.len).await;
        (info, bytes)
    }))
    .buffer_unordered(PARALLEL_READS);
    while let Some((info, bytes)) = reads.next().await {
        let hash = info.key.hash;
        let bytes = bytes.map_err(store_err(format!("reading shard {hash}")))?;
        let parsed = match read_shard(&mut &bytes[..]) {
            Ok(parsed) => parsed,
            Err(e) => {
                report.findings.push(Finding::BadObject {
                    key: format!("shard {hash}"),
                    reason: e.to_string(),
                });
                continue;
            }
        };
        report.shards += 1;
        lens.insert(hash, info.len);
        for file in parsed.shard.files {
            let Some(sha256) = file.sha256 else { continue };
            let sha256 = merkle_as_sha256(&sha256);
            let size = file.terms.iter().map(|t| u64::from(t.unpacked_bytes)).sum();
            let list = candidates.entry(sha256).or_default();
            if list.iter().any(|c| c.record.file_hash == file.file_hash) {
                continue;
            }
            list.push(Candidate {
                record: FileRecord {
                    file_hash: file.file_hash,
                    size,
                    sha256,
                    terms: file.terms,
                },
                shard: hash,
            });
        }
        progress.tick(|| format!("shards read: {}", report.shards));
    }
    progress.done(format!(
        "shards read: {}, files described: {}",
        report.shards,
        candidates.values().map(Vec::len).sum::<usize>()
    ));
    Ok((candidates, lens))
}

/// The candidate a pointer resolves to, or why none does.
async fn choose<'c>(
    candidates: &'c [Candidate],
    oid: [u8; 32],
    size: u64,
    verify: bool,
    hasher: &mut Hasher<'_>,
    hashed: &mut HashMap<MerkleHash, Content>,
    report: &mut RebuildReport,
) -> Result<Result<&'c Candidate, String>, UpkeepError> {
    let sized: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| c.record.size == size)
        .collect();
    if sized.is_empty() {
        return Ok(Err(match candidates.is_empty() {
            true => "no stored shard describes it".to_string(),
            false => "the stored files claiming it have another size".to_string(),
        }));
    }
    if !verify && sized.len() == 1 {
        let only = sized[0];
        return Ok(match hasher.terms_usable(&only.record.terms).await? {
            None => Ok(only),
            Some(why) => Err(why),
        });
    }
    let mut last = String::new();
    for candidate in sized {
        let file = candidate.record.file_hash;
        let content = match hashed.get(&file) {
            Some(content) => content.clone(),
            None => {
                let before = hasher.bytes_read;
                let content = hasher.hash(&candidate.record.terms).await?;
                report.files_hashed += 1;
                report.bytes_hashed += hasher.bytes_read - before;
                hashed.insert(file, content.clone());
                content
            }
        };
        match content {
            Content::Hashed { sha256, size: n } if sha256 == oid && n == size => {
                return Ok(Ok(candidate))
            }
            Content::Hashed { sha256, .. } => {
                last = format!(
                    "stored file {file} claims it, but its content's sha256 is {}",
                    sha256_hex(&sha256)
                )
            }
            Content::Unreadable(why) => last = format!("stored file {file}: {why}"),
        }
    }
    Ok(Err(last))
}

/// The registration of a repository's files found in one stored shard.
async fn registration(
    hasher: &mut Hasher<'_>,
    shard: MerkleHash,
    shard_len: u64,
    repo: &RepoName,
    scope: DedupScope,
    files: Vec<FileRecord>,
) -> Result<ShardRegistration, UpkeepError> {
    let mut first_chunks = Vec::new();
    for file in &files {
        if let Some(term) = file.terms.first() {
            if let Some(meta) = hasher.layout(term.xorb_hash).await? {
                let chunk = meta.footer.chunk_hashes[term.chunk_start as usize];
                first_chunks.push((chunk, file.file_hash));
            }
        }
    }
    Ok(ShardRegistration {
        shard_hash: shard,
        shard_len,
        repo: repo.clone(),
        domain: scope.domain(repo),
        files,
        first_chunks,
    })
}
