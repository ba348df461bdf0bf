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
        let expected = git_xet::xet::pipeline::hash_stream(&bytes[..], false)
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
    let unknown = git_xet::xet::hash::chunk_hash(b"unknown").to_hex();
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
