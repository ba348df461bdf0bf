//! The reference client driven through tests/interop/py/hfx.py, and our client beside it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use git_xet_client::{CasClient, ClientConfig, DownloadOptions, RetryPolicy, Token};
use git_xet_core::chunker::chunk_lengths;
use git_xet_core::hash::{chunk_hash, file_hash};
use git_xet_core::MerkleHash;

pub use crate::support::{random_bytes, write_file, TestServer};

pub const REPO: &str = "org/interop";

/// The venv's python: `GIT_XET_INTEROP_PYTHON`, else `.venv-interop/` in the repository.
/// Missing: a failure under CI (`CI` set), else `None` with the reason printed.
pub fn python() -> Option<PathBuf> {
    let path = std::env::var_os("GIT_XET_INTEROP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv-interop/bin/python"));
    let works = Command::new(&path)
        .args(["-c", "import hf_xet"])
        .output()
        .is_ok_and(|o| o.status.success());
    if works {
        return Some(path);
    }
    let why = format!(
        "no python with hf_xet at {} (run .ci/deps/10-hf-xet.sh or set GIT_XET_INTEROP_PYTHON)",
        path.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{why}");
    }
    eprintln!("skipping: {why}");
    None
}

/// A server, a scratch directory, and the reference client.
pub struct Env {
    pub server: TestServer,
    pub dir: tempfile::TempDir,
    python: PathBuf,
}

/// What hf-xet reports for a file.
#[derive(Debug, serde::Deserialize)]
pub struct HfFile {
    pub hash: String,
    pub size: u64,
}

impl Env {
    pub fn new() -> Option<Env> {
        Some(Env {
            python: python()?,
            server: TestServer::start(),
            dir: tempfile::tempdir().unwrap(),
        })
    }

    /// An environment around a server the test started (e.g. on Garage).
    pub fn with_server(server: TestServer) -> Option<Env> {
        Some(Env {
            python: python()?,
            server,
            dir: tempfile::tempdir().unwrap(),
        })
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.path(name);
        write_file(&p, bytes);
        p
    }

    /// Runs hfx.py with a token of `scope`; returns stdout. Its caches live in the scratch
    /// directory (HF_HOME), so that nothing is shared between tests or with the user.
    fn hfx(&self, scope: &str, args: &[&str]) -> String {
        self.hfx_as(REPO, scope, args)
    }

    /// As `hfx`, with a token of repository `repo`.
    fn hfx_as(&self, repo: &str, scope: &str, args: &[&str]) -> String {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/py/hfx.py");
        let out = Command::new(&self.python)
            .arg("-W")
            .arg("ignore::DeprecationWarning")
            .arg(script)
            .args(args)
            .env("HFX_TOKEN", self.server.token(repo, scope))
            .env("HF_HOME", self.path("hf-home"))
            .output()
            .expect("run python");
        assert!(
            out.status.success(),
            "hfx.py {args:?} failed: {}\nserver log:\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.server.log_text()
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn endpoint(&self) -> String {
        self.server.url.trim_end_matches('/').to_string()
    }

    pub fn hf_upload(&self, paths: &[&Path]) -> Vec<HfFile> {
        self.hf_upload_at(REPO, &self.endpoint(), paths)
    }

    /// Uploads to CAS `endpoint` with a write token of repository `repo`.
    pub fn hf_upload_at(&self, repo: &str, endpoint: &str, paths: &[&Path]) -> Vec<HfFile> {
        let mut args = vec!["upload".to_string(), endpoint.to_string()];
        args.extend(paths.iter().map(|p| p.display().to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        serde_json::from_str(&self.hfx_as(repo, "write", &args)).unwrap()
    }

    pub fn hf_hash(&self, paths: &[&Path]) -> Vec<HfFile> {
        let mut args = vec!["hash".to_string()];
        args.extend(paths.iter().map(|p| p.display().to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        serde_json::from_str(&self.hfx("read", &args)).unwrap()
    }

    /// Downloads a whole file with hf-xet and returns its bytes.
    pub fn hf_download(&self, hash: &str, size: u64, name: &str) -> Vec<u8> {
        self.hf_download_at(REPO, &self.endpoint(), hash, size, name)
    }

    /// Downloads a whole file with hf-xet into the scratch file `name`; returns its path.
    pub fn hf_download_file(&self, hash: &str, size: u64, name: &str) -> PathBuf {
        self.hf_download_file_at(REPO, &self.endpoint(), hash, size, name)
    }

    /// Downloads from CAS `endpoint` with a read token of repository `repo`.
    pub fn hf_download_at(
        &self,
        repo: &str,
        endpoint: &str,
        hash: &str,
        size: u64,
        name: &str,
    ) -> Vec<u8> {
        std::fs::read(self.hf_download_file_at(repo, endpoint, hash, size, name)).unwrap()
    }

    /// Like `hf_download_at`, into the scratch file `name`; returns its path.
    pub fn hf_download_file_at(
        &self,
        repo: &str,
        endpoint: &str,
        hash: &str,
        size: u64,
        name: &str,
    ) -> PathBuf {
        let dest = self.path(name);
        let size = size.to_string();
        let dest_s = dest.display().to_string();
        self.hfx_as(repo, "read", &["download", endpoint, hash, &size, &dest_s]);
        dest
    }

    /// Bytes `start..end` (end exclusive) with hf-xet's streaming download.
    pub fn hf_range(&self, hash: &str, size: u64, start: u64, end: u64) -> Vec<u8> {
        let dest = self.path("hf-range");
        let (size, start, end) = (size.to_string(), start.to_string(), end.to_string());
        let dest_s = dest.display().to_string();
        self.hfx(
            "read",
            &[
                "range",
                &self.endpoint(),
                hash,
                &size,
                &start,
                &end,
                &dest_s,
            ],
        );
        std::fs::read(dest).unwrap()
    }

    /// Our client, with its own metadata directory `meta` and a token of `scope`.
    pub fn ours(&self, meta: &str, scope: &str) -> CasClient {
        let mut config = ClientConfig::new(&self.server.url);
        config.token = Some(Token::new(self.server.token(REPO, scope), None));
        config.metadata_dir = Some(self.path(meta));
        config.staging_dir = Some(self.path(meta).join("staging"));
        config.retry = RetryPolicy::fast();
        CasClient::new(config).unwrap()
    }

    pub fn xorb_bytes_received(&self) -> f64 {
        self.server.metric("git_xet_xorb_bytes_received_total")
    }
}

/// Uploads files with our client in one session; returns their XET hashes.
pub async fn our_upload(client: &CasClient, paths: &[&Path]) -> Vec<MerkleHash> {
    let mut session = client.start_upload().await.unwrap();
    for p in paths {
        session.add_file(p, None).await.unwrap();
    }
    let summary = session.finish().await.unwrap();
    summary.files.iter().map(|f| f.file_hash).collect()
}

/// Downloads with our client (`range`: bytes `s..=e`); the whole file is checked against
/// its XET hash by the client.
pub async fn our_download(
    client: &CasClient,
    hash: &MerkleHash,
    out: &Path,
    range: Option<(u64, u64)>,
) -> Vec<u8> {
    let options = DownloadOptions {
        range,
        ..Default::default()
    };
    let outcome = client.download(hash, out, options).await.unwrap();
    if range.is_none() {
        assert!(outcome.file_hash_verified);
    }
    std::fs::read(out).unwrap()
}

/// The XET file hash of `data`, computed by our protocol core.
pub fn xet_hash(data: &[u8]) -> MerkleHash {
    let mut pos = 0;
    let chunks: Vec<(MerkleHash, u64)> = chunk_lengths(data)
        .into_iter()
        .map(|len| {
            let c = (chunk_hash(&data[pos..pos + len]), len as u64);
            pos += len;
            c
        })
        .collect();
    file_hash(chunks)
}

/// Text that compresses (LZ4 or BG4 chunks), unlike `random_bytes`.
pub fn text(len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 64);
    let mut i = 0u64;
    while out.len() < len {
        out.extend_from_slice(format!("row {i}: value {}\n", i * 7919 % 10007).as_bytes());
        i += 1;
    }
    out.truncate(len);
    out
}

/// `base` with `insert` placed at `at`.
pub fn with_insertion(base: &[u8], at: usize, insert: &[u8]) -> Vec<u8> {
    let mut v = base[..at].to_vec();
    v.extend_from_slice(insert);
    v.extend_from_slice(&base[at..]);
    v
}
