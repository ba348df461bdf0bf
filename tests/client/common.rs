//! Helpers shared by the client tests: a server, a client configured against it, files.

use std::path::{Path, PathBuf};

use git_xet_client::{CasClient, ClientConfig, DownloadOptions, RetryPolicy, Token, UploadSummary};
use git_xet_core::MerkleHash;
use sha2::Digest;

pub use crate::support::{random_bytes, write_file, TestServer};

pub const REPO: &str = "org/models";

/// A server and a scratch directory for files and caches.
pub struct Env {
    pub server: TestServer,
    pub dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Self {
        Env {
            server: TestServer::start(),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes a file in the scratch directory.
    pub fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.path(name);
        write_file(&p, bytes);
        p
    }

    /// A client with a write token, its own metadata directory `meta`, no chunk cache, and
    /// quick retries.
    pub fn client(&self, meta: &str) -> CasClient {
        CasClient::new(self.config(meta)).unwrap()
    }

    pub fn config(&self, meta: &str) -> ClientConfig {
        config_for(
            &self.server.url,
            &self.server.token(REPO, "write"),
            &self.path(meta),
        )
    }

    /// A client like [`Env::client`] with a chunk cache in `chunks`, and a file of `len`
    /// random bytes (`seed`) it uploaded and downloaded once (filling the cache). Returns
    /// the client, the file's hash and its bytes.
    pub async fn cached_download(&self, len: usize, seed: u64) -> (CasClient, MerkleHash, Vec<u8>) {
        let data = random_bytes(len, seed);
        let path = self.file("f", &data);
        let mut config = self.config("meta");
        config.chunk_cache = Some((self.path("chunks"), 1 << 30));
        let client = CasClient::new(config).unwrap();
        let hash = upload(&client, &[&path]).await.files[0].file_hash;
        download(&client, &hash, &self.path("one"), &data).await;
        (client, hash, data)
    }

    pub fn xorb_bytes_received(&self) -> f64 {
        self.server.metric("git_xet_xorb_bytes_received_total")
    }

    pub fn xorb_bytes_served(&self) -> f64 {
        self.server.metric("git_xet_xorb_bytes_served_total")
    }
}

pub fn config_for(url: &str, token: &str, meta: &Path) -> ClientConfig {
    let mut config = ClientConfig::new(url);
    config.token = Some(Token::new(token, None));
    config.metadata_dir = Some(meta.to_path_buf());
    config.staging_dir = Some(meta.join("staging"));
    config.retry = RetryPolicy::fast();
    config
}

pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    sha2::Sha256::digest(bytes).into()
}

/// Uploads files in one session.
pub async fn upload(client: &CasClient, paths: &[&Path]) -> UploadSummary {
    let mut session = client.start_upload().await.unwrap();
    for p in paths {
        session.add_file(p, None).await.unwrap();
    }
    session.finish().await.unwrap()
}

/// Downloads a whole file and returns its bytes (verified against `expected`).
pub async fn download(
    client: &CasClient,
    hash: &MerkleHash,
    out: &Path,
    expected: &[u8],
) -> Vec<u8> {
    let options = DownloadOptions {
        expected_sha256: Some(sha256(expected)),
        ..Default::default()
    };
    let outcome = client.download(hash, out, options).await.unwrap();
    assert!(outcome.file_hash_verified);
    assert_eq!(outcome.bytes_written, expected.len() as u64);
    let got = std::fs::read(out).unwrap();
    assert!(got == expected, "downloaded bytes differ");
    got
}

/// Downloads bytes `s..=e`.
pub async fn download_range(
    client: &CasClient,
    hash: &MerkleHash,
    out: &Path,
    s: u64,
    e: u64,
) -> Vec<u8> {
    let options = DownloadOptions {
        range: Some((s, e)),
        ..Default::default()
    };
    client.download(hash, out, options).await.unwrap();
    std::fs::read(out).unwrap()
}

/// `base` with `insert` placed at `at`.
pub fn with_insertion(base: &[u8], at: usize, insert: &[u8]) -> Vec<u8> {
    let mut v = base[..at].to_vec();
    v.extend_from_slice(insert);
    v.extend_from_slice(&base[at..]);
    v
}

/// Chunk hashes and lengths of some bytes, as the uploader will cut them.
pub fn chunks_of(bytes: &[u8]) -> Vec<(MerkleHash, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    for len in git_xet_core::chunker::chunk_lengths(bytes) {
        out.push((git_xet_core::hash::chunk_hash(&bytes[at..at + len]), len));
        at += len;
    }
    out
}

/// Bytes of `new` in chunks that `old` does not have.
pub fn changed_bytes(old: &[u8], new: &[u8]) -> u64 {
    let known: std::collections::HashSet<MerkleHash> =
        chunks_of(old).into_iter().map(|c| c.0).collect();
    chunks_of(new)
        .into_iter()
        .filter(|c| !known.contains(&c.0))
        .map(|c| c.1 as u64)
        .sum()
}

/// Files (not directories) under a directory, recursively.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Two versions of a file uploaded by one client, and a second client (metadata
/// `puller-meta`) that has downloaded the first to `v1-local`: the state before a pull.
pub struct TwoVersions {
    pub v1: Vec<u8>,
    pub v2: Vec<u8>,
    pub h1: MerkleHash,
    pub h2: MerkleHash,
    pub puller: CasClient,
    pub local_v1: PathBuf,
}

impl TwoVersions {
    /// `v1` is 8 MiB of random bytes (`seed`); `v2` inserts `insert` at `at`.
    pub async fn set_up(env: &Env, seed: u64, at: usize, insert: &[u8]) -> TwoVersions {
        let v1 = random_bytes(8 << 20, seed);
        let v2 = with_insertion(&v1, at, insert);
        let (p1, p2) = (env.file("v1", &v1), env.file("v2", &v2));
        let uploader = env.client("uploader-meta");
        let h1 = upload(&uploader, &[&p1]).await.files[0].file_hash;
        let h2 = upload(&uploader, &[&p2]).await.files[0].file_hash;
        let puller = env.client("puller-meta");
        let local_v1 = env.path("clone/v1");
        std::fs::create_dir_all(local_v1.parent().unwrap()).unwrap();
        download(&puller, &h1, &local_v1, &v1).await;
        TwoVersions {
            v1,
            v2,
            h1,
            h2,
            puller,
            local_v1,
        }
    }
}
