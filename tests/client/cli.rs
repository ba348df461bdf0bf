//! `git xet upload` and `git xet download` as a user runs them.

use crate::common::*;
use crate::support::git_xet;

#[test]
fn upload_prints_hashes_and_download_writes_files_and_ranges() {
    let env = Env::new();
    let a = random_bytes(2 << 20, 101);
    let mut b = a.clone();
    b.extend_from_slice(&random_bytes(1 << 20, 102));
    let (pa, pb) = (env.file("a.bin", &a), env.file("b.bin", &b));
    let token = env.server.token(REPO, "write");
    let cache = env.path("cache");
    let out = git_xet()
        .args(["upload", "--endpoint", &env.server.url, "--token", &token])
        .arg(&pa)
        .arg(&pb)
        .env("GIT_XET_CACHE_DIR", &cache)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    for (line, (path, bytes)) in lines.iter().zip([(&pa, &a), (&pb, &b)]) {
        let expected = git_xet_io::pipeline::hash_stream(&bytes[..], false)
            .unwrap()
            .file_hash;
        assert_eq!(*line, format!("{expected}  {}", path.display()));
    }
    // b repeats a: the summary says so.
    assert!(
        stderr.contains("deduplicated: ") && !stderr.contains("deduplicated: 0 B"),
        "{stderr}"
    );

    let hash_b = lines[1].split_whitespace().next().unwrap();
    let dest = env.path("b.out");
    let out = git_xet()
        .args([
            "download",
            "--endpoint",
            &env.server.url,
            "--token",
            &token,
            hash_b,
            "-o",
        ])
        .arg(&dest)
        .env("GIT_XET_CACHE_DIR", &cache)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    assert!(std::fs::read(&dest).unwrap() == b);

    let out = git_xet()
        .args([
            "download",
            "--endpoint",
            &env.server.url,
            "--token",
            &token,
            hash_b,
            "--range",
            "10-19",
            "-o",
        ])
        .arg(&dest)
        .args(["--no-chunk-cache"])
        .env("GIT_XET_CACHE_DIR", &cache)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(&dest).unwrap(), b[10..20]);
}

#[test]
fn download_errors_are_one_clear_line_and_change_nothing() {
    let env = Env::new();
    let token = env.server.token(REPO, "read");
    let dest = env.path("out");
    std::fs::write(&dest, b"keep me").unwrap();
    let unknown = git_xet_core::hash::chunk_hash(b"unknown").to_hex();
    let out = git_xet()
        .args([
            "download",
            "--endpoint",
            &env.server.url,
            "--token",
            &token,
            &unknown,
            "-o",
        ])
        .arg(&dest)
        .env("GIT_XET_CACHE_DIR", env.path("cache"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("git-xet: error:") && stderr.contains("404"),
        "{stderr}"
    );
    assert!(!stderr.contains(&token), "the token is never printed");
    assert_eq!(std::fs::read(&dest).unwrap(), b"keep me");

    let out = git_xet()
        .args([
            "download",
            "--endpoint",
            &env.server.url,
            "not-a-hash",
            "-o",
        ])
        .arg(&dest)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid FILE_HASH"));
}

#[test]
fn two_processes_share_a_small_chunk_cache_safely() {
    let env = Env::new();
    let token = env.server.token(REPO, "write");
    let files: Vec<(std::path::PathBuf, Vec<u8>)> = (0..4)
        .map(|i| {
            let bytes = random_bytes(2 << 20, 200 + i);
            (env.file(&format!("f{i}"), &bytes), bytes)
        })
        .collect();
    let out = git_xet()
        .args([
            "upload",
            "--endpoint",
            &env.server.url,
            "--token",
            &token,
            "--no-chunk-cache",
        ])
        .args(files.iter().map(|f| &f.0))
        .env("GIT_XET_CACHE_DIR", env.path("upload-cache"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hashes: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();

    // Two processes, each downloading every file twice through one 6 MiB cache that cannot
    // hold all four: entries are added, hit and evicted under each other's feet.
    let cache = env.path("shared-cache");
    let run = |p: usize| {
        let mut children = Vec::new();
        for round in 0..2 {
            for (i, hash) in hashes.iter().enumerate() {
                let dest = env.path(&format!("p{p}-r{round}-f{i}"));
                let child = git_xet()
                    .args([
                        "download",
                        "--endpoint",
                        &env.server.url,
                        "--token",
                        &token,
                        hash,
                    ])
                    .args(["--chunk-cache-size", "6", "--metadata-dir"])
                    .arg(env.path(&format!("meta-{p}")))
                    .arg("-o")
                    .arg(&dest)
                    .env("GIT_XET_CACHE_DIR", &cache)
                    .output()
                    .unwrap();
                children.push((child, dest, i));
            }
        }
        children
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| run(0));
        let b = s.spawn(|| run(1));
        (a.join().unwrap(), b.join().unwrap())
    });
    for (out, dest, i) in a.into_iter().chain(b) {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            std::fs::read(&dest).unwrap() == files[i].1,
            "{}",
            dest.display()
        );
    }
    let cached: u64 = files_under(&cache.join("chunks"))
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    // Eight 2 MiB entries were added: eviction kept the cache within its limit.
    assert!(
        cached > 0 && cached <= 6 << 20,
        "cache holds {cached} bytes"
    );
}

#[test]
fn the_blocking_facade_uploads_and_downloads() {
    let env = Env::new();
    let client = git_xet_client::BlockingClient::new(env.config("meta")).unwrap();
    let data = random_bytes(500_000, 300);
    let path = env.file("f", &data);
    let summary = client.upload_files(&[&path]).unwrap();
    let out = env.path("out");
    let options = git_xet_client::DownloadOptions {
        expected_sha256: Some(sha256(&data)),
        ..Default::default()
    };
    client
        .download(&summary.files[0].file_hash, &out, options)
        .unwrap();
    assert!(std::fs::read(&out).unwrap() == data);
}
