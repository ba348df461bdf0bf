//! The blocks' source: LFS objects read in byte ranges through XET. The Batch API request,
//! credentials, TLS, proxies, ssh authentication and token refresh are the filter's own
//! ([`Fetcher`], one code path). A range is read into memory through a reconstruction asked
//! once for it or for a wider range (a read-ahead window), kept in memory and on disk beside
//! the chunk cache: a range read again, by this mount or a later one, makes no query, and
//! its xorb ranges come from the chunk cache when it still has them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use crate::blocks::{RangeSource, Sink};
use crate::edges::Edges;
use crate::MountError;
use git_xet_client::records::FileRecord;
use git_xet_client::store::ChunkStore;
use git_xet_client::{CasClient, ClientConfig, RetryPolicy};
use git_xet_core::lfs::pointer::{Oid, Pointer};
use git_xet_core::reconstruction::Reconstruction;
use git_xet_core::MerkleHash;
use git_xet_git::filter::fetch::{Fetcher, Handoff};
use git_xet_git::repo::Repo;

/// A reconstruction and the range `start..=end` it was asked for.
type Asked = ((u64, u64), Arc<Reconstruction>);
/// The client and XET hash an object is read through.
type Located = (CasClient, MerkleHash);

/// `len` bytes at `start` of a local file.
fn read_file_range(path: &std::path::Path, start: u64, len: u64) -> Result<Vec<u8>, MountError> {
    let file = std::fs::File::open(path).map_err(|e| MountError::io(path, e))?;
    let mut buf = vec![0u8; len as usize];
    std::os::unix::fs::FileExt::read_exact_at(&file, &mut buf, start)
        .map_err(|e| MountError::io(path, e))?;
    Ok(buf)
}

/// LFS objects of one repository through its remote's XET server.
pub struct XetRemote {
    fetcher: Arc<Mutex<Option<Fetcher>>>,
    repo: Repo,
    cache: Option<(PathBuf, u64)>,
    located: Mutex<HashMap<Oid, Located>>,
    /// Whole-object downloads through git-lfs, one at a time; whether that was said.
    whole: Mutex<()>,
    said: AtomicBool,
    /// Per XET file hash, the reconstructions asked so far.
    recons: Mutex<HashMap<MerkleHash, Vec<Asked>>>,
    /// Per CAS URL, a client without credentials that reads only what the caches hold.
    offline: Mutex<HashMap<String, CasClient>>,
    /// Chunks at the edges of ranges read: adjacent reads fetch them once.
    edges: Arc<Edges>,
    /// The per-user chunk store (docs/store.md): an object it holds whole is read from it,
    /// with no request. Per object, its record there if the store holds all its chunks.
    store: Option<ChunkStore>,
    records: Mutex<HashMap<Oid, Option<Arc<FileRecord>>>>,
    runtime: tokio::runtime::Handle,
    timeout: Duration,
}

impl XetRemote {
    /// `cache`: the chunk cache (directory, size bound); `timeout`: how long one range
    /// may take, Batch API request included.
    pub fn new(
        repo: Repo,
        cache: Option<(PathBuf, u64)>,
        timeout: Duration,
    ) -> Result<XetRemote, MountError> {
        let runtime = git_xet_io::runtime::handle().map_err(MountError::Runtime)?;
        let store = git_xet_git::store::open(&repo);
        Ok(XetRemote {
            fetcher: Default::default(),
            repo,
            cache,
            located: Default::default(),
            recons: Default::default(),
            whole: Default::default(),
            said: AtomicBool::new(false),
            offline: Default::default(),
            edges: Default::default(),
            store,
            records: Default::default(),
            runtime,
            timeout,
        })
    }

    /// The client and XET hash of `object`, asked once per object (the client refreshes
    /// its token by itself). The Batch API request runs on its own thread so that a
    /// server that does not answer costs the reader `timeout`, not a hang.
    fn locate(&self, object: &Pointer) -> Result<Result<Located, Handoff>, MountError> {
        if let Some(found) = self.located.lock().expect("located").get(&object.oid) {
            return Ok(Ok(found.clone()));
        }
        let (tx, rx) = mpsc::channel();
        let (fetcher, repo, cache, pointer) = (
            self.fetcher.clone(),
            self.repo.clone(),
            self.cache.clone(),
            object.clone(),
        );
        std::thread::spawn(move || {
            let mut guard = fetcher.lock().expect("fetcher");
            let result = (|| {
                if guard.is_none() {
                    let mut f = Fetcher::new(&repo)?;
                    if let Some((dir, max)) = cache {
                        f.set_chunk_cache(dir, max);
                    }
                    *guard = Some(f);
                }
                guard.as_mut().expect("set above").locate(&pointer)
            })();
            let _ = tx.send(result);
        });
        let found = match rx.recv_timeout(self.timeout) {
            Ok(Ok(Ok(found))) => found,
            Ok(Ok(Err(why))) => return Ok(Err(why)),
            Ok(Err(e)) => return Err(MountError::Git(Box::new(e))),
            Err(_) => {
                return Err(MountError::Timeout {
                    oid: object.oid.to_string(),
                    offset: 0,
                    seconds: self.timeout.as_secs(),
                })
            }
        };
        self.located
            .lock()
            .expect("located")
            .insert(object.oid, found.clone());
        self.note(object, &found.0, &found.1);
        Ok(Ok(found))
    }

    /// For a server that does not offer XET (or a remote git-lfs reaches another way): the
    /// whole object through git-lfs itself (`git lfs smudge`, which keeps it in
    /// `.git/lfs/objects`), once; said once on stderr. Later reads are local.
    fn whole_object(&self, object: &Pointer, why: &Handoff) -> Result<PathBuf, MountError> {
        let _one_at_a_time = self.whole.lock().expect("whole downloads");
        let store = self.repo.lfs_store();
        if let Some(path) = store.find(&object.oid, object.size) {
            return Ok(path);
        }
        if !self.said.swap(true, Ordering::SeqCst) {
            eprintln!(
                "git-xet: {why}: files are read whole through git-lfs (into .git/lfs/objects) \
                 on first read"
            );
        }
        let dir = self.repo.git().dir().unwrap_or(std::path::Path::new("."));
        let mut child = std::process::Command::new("git")
            .args(["lfs", "smudge"])
            .current_dir(dir)
            .env_remove("GIT_LFS_SKIP_SMUDGE")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| MountError::io(std::path::Path::new("git"), e))?;
        let pointer = object.to_text();
        let mut stdin = child.stdin.take().expect("piped");
        let fed = std::io::Write::write_all(&mut stdin, pointer.as_bytes());
        drop(stdin);
        let out = child
            .wait_with_output()
            .map_err(|e| MountError::io(std::path::Path::new("git"), e))?;
        match store.find(&object.oid, object.size) {
            Some(path) if out.status.success() && fed.is_ok() => Ok(path),
            _ => Err(MountError::Unavailable(format!(
                "{} could not be fetched through git-lfs ({why}): {}",
                object.oid,
                String::from_utf8_lossy(&out.stderr).trim()
            ))),
        }
    }

    /// Where an object's XET hash and CAS URL are noted once located, so that a later
    /// mount serves what the caches hold with no request at all (Batch API included).
    fn note_path(&self, object: &Pointer) -> Option<PathBuf> {
        let (chunks, _) = self.cache.as_ref()?;
        Some(
            chunks
                .parent()?
                .join("reconstructions")
                .join("objects")
                .join(object.oid.to_string()),
        )
    }

    fn note(&self, object: &Pointer, client: &CasClient, hash: &MerkleHash) {
        let Some(path) = self.note_path(object) else {
            return;
        };
        let line = format!("{} {}\n", hash.to_hex(), client.config().cas_url);
        let saved = (|| -> std::io::Result<()> {
            let dir = path.parent().expect("a file in a directory");
            std::fs::create_dir_all(dir)?;
            let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
            std::io::Write::write_all(&mut tmp, line.as_bytes())?;
            tmp.persist(&path)?;
            Ok(())
        })();
        if let Err(e) = saved {
            tracing::debug!("could not note where {} is: {e}", object.oid);
        }
    }

    /// Bytes `start..=end` from the caches alone (a reconstruction kept on disk, its xorb
    /// ranges in the chunk cache), through a client that has no token and retries nothing;
    /// None when anything is missing (the caller then asks the server).
    fn read_cached(
        &self,
        object: &Pointer,
        (start, end): (u64, u64),
        deadline: tokio::time::Instant,
        sink: &Shared,
    ) -> bool {
        let Some(text) = self
            .note_path(object)
            .and_then(|p| std::fs::read_to_string(p).ok())
        else {
            return false;
        };
        let Some((hex, cas_url)) = text.trim().split_once(' ') else {
            return false;
        };
        let Ok(hash) = MerkleHash::from_hex(hex) else {
            return false;
        };
        let client = {
            let mut offline = self.offline.lock().expect("offline clients");
            match offline.get(cas_url) {
                Some(c) => c.clone(),
                None => {
                    let mut config = ClientConfig::new(cas_url);
                    config.retry = RetryPolicy::none();
                    config.chunk_cache = self.cache.clone();
                    let Ok(c) = CasClient::new(config) else {
                        return false;
                    };
                    offline.insert(cas_url.to_string(), c.clone());
                    c
                }
            }
        };
        self.read_through(&client, &hash, object, (start, end), false, deadline, sink)
            .is_ok_and(|read| read)
    }

    /// Where the reconstructions of `hash` from this server are kept: beside the chunk
    /// cache (`reconstructions/<server key>/<hash>/<start>-<end>.json`); None without it.
    fn recon_dir(&self, client: &CasClient, hash: &MerkleHash) -> Option<PathBuf> {
        let (chunks, _) = self.cache.as_ref()?;
        let server = git_xet_client::endpoint_key(&client.config().cas_url);
        Some(
            chunks
                .parent()?
                .join("reconstructions")
                .join(server)
                .join(hash.to_hex()),
        )
    }

    /// `start..=end` in pieces, each with a kept reconstruction covering it (those asked
    /// by this mount, and on the first use of `hash` those on disk), longest first; and
    /// where the first stretch no kept reconstruction covers begins, if one does.
    fn cover(
        &self,
        client: &CasClient,
        hash: &MerkleHash,
        start: u64,
        end: u64,
    ) -> (Vec<(Asked, u64, u64)>, Option<u64>) {
        let mut recons = self.recons.lock().expect("reconstructions");
        let list = recons
            .entry(*hash)
            .or_insert_with(|| self.load_kept(client, hash));
        let mut pieces = Vec::new();
        let mut pos = start;
        while pos <= end {
            let best = list
                .iter()
                .filter(|((s, e), _)| *s <= pos && pos <= *e)
                .max_by_key(|((_, e), _)| *e);
            match best {
                Some(found) => {
                    let to = found.0 .1.min(end);
                    pieces.push((found.clone(), pos, to));
                    pos = to + 1;
                }
                None => return (pieces, Some(pos)),
            }
        }
        (pieces, None)
    }

    /// The reconstructions of `hash` kept on disk (a damaged one is only a query more).
    fn load_kept(&self, client: &CasClient, hash: &MerkleHash) -> Vec<Asked> {
        let Some(dir) = self.recon_dir(client, hash) else {
            return Vec::new();
        };
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let (s, t) = name.strip_suffix(".json")?.split_once('-')?;
                let range = (s.parse::<u64>().ok()?, t.parse::<u64>().ok()?);
                let recon: Reconstruction =
                    serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok()?;
                Some((range, Arc::new(recon)))
            })
            .collect()
    }

    /// Keeps a reconstruction in memory and on disk (written whole, then renamed).
    fn remember(&self, client: &CasClient, hash: &MerkleHash, found: &Asked) {
        let ((s, e), recon) = found;
        self.recons
            .lock()
            .expect("reconstructions")
            .entry(*hash)
            .or_default()
            .push(found.clone());
        let Some(dir) = self.recon_dir(client, hash) else {
            return;
        };
        let saved = (|| -> std::io::Result<()> {
            std::fs::create_dir_all(&dir)?;
            let mut tmp = tempfile::NamedTempFile::new_in(&dir)?;
            serde_json::to_writer(&mut tmp, recon.as_ref())?;
            tmp.persist(dir.join(format!("{s}-{e}.json")))?;
            Ok(())
        })();
        if let Err(e) = saved {
            tracing::debug!("could not keep the reconstruction of {hash}: {e}");
        }
    }

    /// Forgets a reconstruction that did not serve (its xorbs may be gone from the server).
    fn forget(&self, client: &CasClient, hash: &MerkleHash, range: (u64, u64)) {
        if let Some(list) = self.recons.lock().expect("reconstructions").get_mut(hash) {
            list.retain(|(r, _)| *r != range);
        }
        if let Some(dir) = self.recon_dir(client, hash) {
            let _ = std::fs::remove_file(dir.join(format!("{}-{}.json", range.0, range.1)));
        }
    }

    /// Bytes `start..=end` from the chunk store, when it holds every chunk of the object
    /// (asked once per object; a range evicted since is fetched instead).
    fn read_stored(&self, object: &Pointer, range: (u64, u64)) -> Option<Vec<u8>> {
        let store = self.store.as_ref()?;
        let record = self
            .records
            .lock()
            .expect("records")
            .entry(object.oid)
            .or_insert_with(|| {
                store
                    .record_for_sha256(&object.oid.0)
                    .filter(|r| r.size() == object.size && store.covers(r))
                    .map(Arc::new)
            })
            .clone()?;
        store.read_range(&record, range)
    }

    fn timed_out(&self, object: &Pointer, start: u64) -> MountError {
        MountError::Timeout {
            oid: object.oid.to_string(),
            offset: start,
            seconds: self.timeout.as_secs(),
        }
    }
}

/// A sink shared by the pieces of one fetch.
type Shared = Arc<Mutex<Sink>>;

#[path = "remote_piece.rs"]
mod piece;

impl XetRemote {
    /// Bytes `start..=end` through `client` into `sink`: the pieces kept reconstructions
    /// cover, and one query for the rest (unless `ask` is false: then false if anything is
    /// not covered). A kept reconstruction that does not serve (its xorbs gone) is
    /// forgotten and the read tried once more.
    #[allow(clippy::too_many_arguments)]
    fn read_through(
        &self,
        client: &CasClient,
        hash: &MerkleHash,
        object: &Pointer,
        (start, end): (u64, u64),
        ask: bool,
        deadline: tokio::time::Instant,
        sink: &Shared,
    ) -> Result<bool, MountError> {
        let mut retried = false;
        'again: loop {
            let (mut pieces, gap) = self.cover(client, hash, start, end);
            if let Some(from) = gap {
                if !ask {
                    return Ok(false);
                }
                let query = client.api().reconstruction(hash, Some((from, end)));
                let recon = self
                    .runtime
                    .block_on(async { tokio::time::timeout_at(deadline, query).await })
                    .map_err(|_| self.timed_out(object, start))??;
                pieces.push((((from, end), Arc::new(recon)), from, end));
            }
            let fresh_from = gap.unwrap_or(u64::MAX);
            for ((asked, recon), s, e) in pieces {
                let fresh = s == fresh_from;
                let read =
                    self.read_piece(client, hash, (asked, &recon), (s, e), start, deadline, sink);
                if let (Ok(Some(fetched)), true) = (&read, fresh) {
                    self.remember(client, hash, fetched);
                }
                match read.map(|_| ()) {
                    Err(None) => return Err(self.timed_out(object, s)),
                    Ok(()) => {}
                    Err(Some(e)) if ask && !retried => {
                        tracing::info!("a kept reconstruction of {hash} did not serve ({e})");
                        self.forget(client, hash, asked);
                        retried = true;
                        continue 'again;
                    }
                    Err(Some(_)) if !ask => return Ok(false),
                    Err(Some(e)) => return Err(MountError::Client(e)),
                }
            }
            return Ok(true);
        }
    }
}

impl RangeSource for XetRemote {
    fn fetch(&self, object: &Pointer, start: u64, len: u64) -> Result<Vec<u8>, MountError> {
        let out = Arc::new(Mutex::new(Vec::new()));
        let into = out.clone();
        let sink: Sink = Box::new(move |at, data| {
            // In place below what it holds (a gap filled, or a retry's repetition).
            let mut out = into.lock().expect("range buffer");
            let at = at as usize;
            if out.len() < at {
                out.resize(at, 0);
            }
            let inside = (out.len() - at).min(data.len());
            out[at..at + inside].copy_from_slice(&data[..inside]);
            out.extend_from_slice(&data[inside..]);
        });
        self.fetch_streaming(object, start, len, sink)?;
        let data = std::mem::take(&mut *out.lock().expect("range buffer"));
        Ok(data)
    }

    fn fetch_streaming(
        &self,
        object: &Pointer,
        start: u64,
        len: u64,
        sink: Sink,
    ) -> Result<(), MountError> {
        if len == 0 {
            return Ok(());
        }
        let sink: Shared = Arc::new(Mutex::new(sink));
        let end = start + len - 1;
        let deadline = tokio::time::Instant::now() + self.timeout;
        let located = self
            .located
            .lock()
            .expect("located")
            .get(&object.oid)
            .cloned();
        if let Some(data) = self.read_stored(object, (start, end)) {
            (sink.lock().expect("sink"))(0, &data);
            return Ok(());
        }
        if located.is_none() && self.read_cached(object, (start, end), deadline, &sink) {
            return Ok(());
        }
        let (client, hash) = match located {
            Some(found) => found,
            None => match self.locate(object)? {
                Ok(found) => found,
                // A Batch API request that failed (unreachable, refused): EIO, asked again
                // by the next read.
                Err(why @ Handoff::Batch(_)) => {
                    return Err(MountError::Unavailable(format!(
                        "{} cannot be read through XET: {why}",
                        object.oid
                    )))
                }
                Err(why) => {
                    let path = self.whole_object(object, &why)?;
                    let data = read_file_range(&path, start, len)?;
                    (sink.lock().expect("sink"))(0, &data);
                    return Ok(());
                }
            },
        };
        if self.read_through(&client, &hash, object, (start, end), true, deadline, &sink)? {
            Ok(())
        } else {
            Err(MountError::Unavailable("nothing read".into()))
        }
    }
}
