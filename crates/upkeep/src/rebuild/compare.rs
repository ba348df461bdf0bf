//! `git xet server index check`: the live index against one rebuilt from the store and the
//! repositories. Files are compared by what serving them needs (present, size, sha256, which
//! repositories see them under which sha256), not by their terms: two valid shards may
//! describe one file with different terms.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use crate::gc::{on_index, UpkeepError};
use git_xet_core::hash::sha256_hex;
use git_xet_core::MerkleHash;
use git_xet_index::RepoName;
use git_xet_index::{FileRecord, Index};

const PAGE: usize = 1000;

/// Which index holds something the other lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Live,
    Rebuilt,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::Live => "only the live index",
            Side::Rebuilt => "only a rebuild (the live index lacks it)",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Difference {
    Xorb {
        hash: MerkleHash,
        only: Side,
    },
    XorbSize {
        hash: MerkleHash,
        live: u64,
        rebuilt: u64,
    },
    File {
        hash: MerkleHash,
        only: Side,
    },
    FileRecord {
        hash: MerkleHash,
        what: String,
    },
    /// A repository sees a file (under a sha256) in one index only.
    Visible {
        repo: RepoName,
        file: MerkleHash,
        sha256: [u8; 32],
        only: Side,
    },
    Private {
        repo: RepoName,
        live: bool,
        rebuilt: bool,
    },
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Difference::Xorb { hash, only } => write!(f, "xorb {hash}: in {only}"),
            Difference::XorbSize {
                hash,
                live,
                rebuilt,
            } => write!(
                f,
                "xorb {hash}: the live index says {live} bytes, the stored object has {rebuilt}"
            ),
            Difference::File { hash, only } => write!(f, "file {hash}: in {only}"),
            Difference::FileRecord { hash, what } => write!(f, "file {hash}: {what}"),
            Difference::Visible {
                repo,
                file,
                sha256,
                only,
            } => write!(
                f,
                "{repo}: LFS object {} (file {file}) is visible in {only}",
                sha256_hex(sha256)
            ),
            Difference::Private {
                repo,
                live,
                rebuilt,
            } => {
                let word = |p: &bool| if *p { "private" } else { "public" };
                write!(
                    f,
                    "{repo}: {} in the live index, {} in a rebuild (the repository's git config)",
                    word(live),
                    word(rebuilt)
                )
            }
        }
    }
}

/// Every difference between `live` and `rebuilt`, whose repositories are `repos`.
pub async fn compare(
    live: &Arc<dyn Index>,
    rebuilt: &Arc<dyn Index>,
    repos: &[RepoName],
) -> Result<Vec<Difference>, UpkeepError> {
    let mut out = Vec::new();
    xorbs(live, rebuilt, &mut out).await?;
    files(live, rebuilt, &mut out).await?;
    for repo in repos {
        let name = repo.clone();
        let a = on_index(live, move |i| i.repo_private(&name)).await?;
        let name = repo.clone();
        let b = on_index(rebuilt, move |i| i.repo_private(&name)).await?;
        if a != b {
            out.push(Difference::Private {
                repo: repo.clone(),
                live: a,
                rebuilt: b,
            });
        }
    }
    Ok(out)
}

async fn xorbs(
    live: &Arc<dyn Index>,
    rebuilt: &Arc<dyn Index>,
    out: &mut Vec<Difference>,
) -> Result<(), UpkeepError> {
    let condemned: HashSet<MerkleHash> = on_index(live, |i| i.condemned_xorbs())
        .await?
        .into_iter()
        .collect();
    let a: HashMap<MerkleHash, u64> = on_index(live, |i| i.indexed_xorbs())
        .await?
        .into_iter()
        .filter(|x| !condemned.contains(&x.hash))
        .map(|x| (x.hash, x.stored_len))
        .collect();
    let b: HashMap<MerkleHash, u64> = on_index(rebuilt, |i| i.indexed_xorbs())
        .await?
        .into_iter()
        .map(|x| (x.hash, x.stored_len))
        .collect();
    let mut found = Vec::new();
    for (hash, len) in &a {
        match b.get(hash) {
            None => found.push(Difference::Xorb {
                hash: *hash,
                only: Side::Live,
            }),
            Some(other) if other != len => found.push(Difference::XorbSize {
                hash: *hash,
                live: *len,
                rebuilt: *other,
            }),
            Some(_) => {}
        }
    }
    found.extend(
        b.keys()
            .filter(|h| !a.contains_key(h))
            .map(|hash| Difference::Xorb {
                hash: *hash,
                only: Side::Rebuilt,
            }),
    );
    found.sort_by_key(|d| match d {
        Difference::Xorb { hash, .. } | Difference::XorbSize { hash, .. } => *hash.as_bytes(),
        _ => [0; 32],
    });
    out.extend(found);
    Ok(())
}

/// Pages of files from one index, in file-hash order.
struct Pages {
    index: Arc<dyn Index>,
    page: std::vec::IntoIter<FileRecord>,
    after: Option<MerkleHash>,
    done: bool,
}

impl Pages {
    fn new(index: &Arc<dyn Index>) -> Pages {
        Pages {
            index: index.clone(),
            page: Vec::new().into_iter(),
            after: None,
            done: false,
        }
    }

    async fn next(&mut self) -> Result<Option<FileRecord>, UpkeepError> {
        if let Some(file) = self.page.next() {
            return Ok(Some(file));
        }
        if self.done {
            return Ok(None);
        }
        let from = self.after;
        let page = on_index(&self.index, move |i| i.files_page(from.as_ref(), PAGE)).await?;
        self.done = page.len() < PAGE;
        self.after = page.last().map(|f| f.file_hash);
        self.page = page.into_iter();
        Ok(self.page.next())
    }
}

async fn files(
    live: &Arc<dyn Index>,
    rebuilt: &Arc<dyn Index>,
    out: &mut Vec<Difference>,
) -> Result<(), UpkeepError> {
    let (mut a, mut b) = (Pages::new(live), Pages::new(rebuilt));
    let (mut x, mut y) = (a.next().await?, b.next().await?);
    loop {
        let order = match (&x, &y) {
            (None, None) => break,
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (Some(p), Some(q)) => p.file_hash.as_bytes().cmp(q.file_hash.as_bytes()),
        };
        match order {
            std::cmp::Ordering::Less => {
                let p = x.take().expect("present");
                out.push(Difference::File {
                    hash: p.file_hash,
                    only: Side::Live,
                });
                claims(live, rebuilt, &p.file_hash, out).await?;
                x = a.next().await?;
            }
            std::cmp::Ordering::Greater => {
                let q = y.take().expect("present");
                out.push(Difference::File {
                    hash: q.file_hash,
                    only: Side::Rebuilt,
                });
                claims(live, rebuilt, &q.file_hash, out).await?;
                y = b.next().await?;
            }
            std::cmp::Ordering::Equal => {
                let (p, q) = (x.take().expect("present"), y.take().expect("present"));
                if p.size != q.size {
                    out.push(Difference::FileRecord {
                        hash: p.file_hash,
                        what: format!(
                            "{} bytes in the live index, {} in a rebuild",
                            p.size, q.size
                        ),
                    });
                }
                if p.sha256 != q.sha256 {
                    out.push(Difference::FileRecord {
                        hash: p.file_hash,
                        what: format!(
                            "sha256 {} in the live index, {} in a rebuild",
                            sha256_hex(&p.sha256),
                            sha256_hex(&q.sha256)
                        ),
                    });
                }
                claims(live, rebuilt, &p.file_hash, out).await?;
                (x, y) = (a.next().await?, b.next().await?);
            }
        }
    }
    Ok(())
}

/// The repositories that see `file` in one index and not the other.
async fn claims(
    live: &Arc<dyn Index>,
    rebuilt: &Arc<dyn Index>,
    file: &MerkleHash,
    out: &mut Vec<Difference>,
) -> Result<(), UpkeepError> {
    let set = |claims: Vec<git_xet_index::gc::Sha256Claim>| -> BTreeSet<(String, [u8; 32])> {
        claims
            .into_iter()
            .map(|c| (c.repo.as_str().to_string(), c.sha256))
            .collect()
    };
    let f = *file;
    let a = set(on_index(live, move |i| i.sha256_claims(&f)).await?);
    let b = set(on_index(rebuilt, move |i| i.sha256_claims(&f)).await?);
    for (claims, other, only) in [(&a, &b, Side::Live), (&b, &a, Side::Rebuilt)] {
        for (repo, sha256) in claims.difference(other) {
            if let Ok(repo) = RepoName::parse(repo) {
                out.push(Difference::Visible {
                    repo,
                    file: *file,
                    sha256: *sha256,
                    only,
                });
            }
        }
    }
    Ok(())
}
