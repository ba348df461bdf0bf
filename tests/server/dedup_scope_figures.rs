//! The cost of `--dedup-scope`, measured: N repositories in two orgs upload the same
//! content with our client (each its own user: no client-side state shared), on a server of
//! each scope; printed are the xorb bytes uploaded and the xorb bytes stored on disk.
//! docs/benchmarks.md ("Dedup scopes") quotes the figures of
//! `cargo test --test server dedup_scope_figures -- --nocapture`.

use std::path::Path;

use git_xet_client::{BlockingClient, ClientConfig, RetryPolicy, Token};

use crate::support::{random_bytes, TestServer};

const REPOS: [&str; 4] = ["org1/r1", "org1/r2", "org2/r3", "org2/r4"];
const SIZE: usize = 8 << 20;

/// Bytes of the files under `dir`, recursively.
fn disk_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => disk_bytes(&e.path()),
            _ => e.metadata().map(|m| m.len()).unwrap_or(0),
        })
        .sum()
}

/// Uploads `content[i]` into `REPOS[i]` on a fresh server of `scope`; returns (bytes
/// uploaded, bytes stored), checking every file reads back.
fn measure(scope: &str, content: &[Vec<u8>]) -> (u64, u64) {
    let server = TestServer::start_with(&["--dedup-scope", scope]);
    let dir = tempfile::tempdir().unwrap();
    for (i, (repo, data)) in REPOS.iter().zip(content).enumerate() {
        let path = dir.path().join(format!("file{i}"));
        std::fs::write(&path, data).unwrap();
        let mut config = ClientConfig::new(&server.url);
        config.token = Some(Token::new(server.token(repo, "write"), None));
        config.metadata_dir = Some(dir.path().join(format!("meta{i}")));
        config.staging_dir = Some(dir.path().join(format!("meta{i}/staging")));
        config.retry = RetryPolicy::fast();
        let client = BlockingClient::new(config).unwrap();
        let summary = client.upload_files(&[path.as_path()]).unwrap();
        let back = dir.path().join(format!("back{i}"));
        client
            .download(&summary.files[0].file_hash, &back, Default::default())
            .unwrap();
        assert!(std::fs::read(&back).unwrap() == *data, "{scope} {repo}");
    }
    let uploaded = server.metric("git_xet_xorb_bytes_received_total") as u64;
    (uploaded, disk_bytes(&server.data.join("xorbs")))
}

#[test]
fn dedup_scope_figures() {
    let base = random_bytes(SIZE, 60);
    let same: Vec<Vec<u8>> = REPOS.iter().map(|_| base.clone()).collect();
    // Each repository's version differs by 64 KiB of its own in a different place.
    let edited: Vec<Vec<u8>> = (0..REPOS.len())
        .map(|i| {
            let mut v = base.clone();
            let at = (i + 1) * SIZE / (REPOS.len() + 1);
            v.splice(at..at, random_bytes(64 << 10, 70 + i as u64));
            v
        })
        .collect();
    let mb = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "{} repositories ({}), {} MiB each (random bytes):",
        REPOS.len(),
        REPOS.join(", "),
        SIZE >> 20
    );
    println!("| content | scope | uploaded MiB | stored MiB |");
    println!("|---|---|---|---|");
    for (name, content) in [("same file", &same), ("edited copies", &edited)] {
        let mut figures = Vec::new();
        for scope in ["server", "org", "repo"] {
            let (up, stored) = measure(scope, content);
            println!("| {name} | {scope} | {:.1} | {:.1} |", mb(up), mb(stored));
            figures.push((up, stored));
        }
        // Wider scopes never upload more.
        assert!(
            figures[0].0 <= figures[1].0 && figures[1].0 <= figures[2].0,
            "{figures:?}"
        );
    }
}
