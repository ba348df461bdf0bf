//! `git xet filter-process` spoken to directly, byte by byte: the long-running filter
//! protocol (handshake, capabilities, per-file status, delayed smudging) and what it does
//! with malformed input.

use std::io::Write;
use std::path::Path;
use std::process::Stdio;

use crate::env::{assert_file_is, stderr, GitEnv};

/// A pkt-line.
fn pkt(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:04x}", data.len() + 4).into_bytes();
    out.extend_from_slice(data);
    out
}

/// Text lines as pkt-lines, then a flush.
fn list(lines: &[&str]) -> Vec<u8> {
    let mut out: Vec<u8> = lines
        .iter()
        .flat_map(|l| pkt(format!("{l}\n").as_bytes()))
        .collect();
    out.extend(b"0000");
    out
}

/// A content section: one packet (none when empty), then a flush.
fn content(bytes: &[u8]) -> Vec<u8> {
    let mut out = if bytes.is_empty() {
        Vec::new()
    } else {
        pkt(bytes)
    };
    out.extend(b"0000");
    out
}

fn run_filter(env: &GitEnv, repo: &Path, input: &[u8]) -> std::process::Output {
    let mut child = env
        .command(crate::support::git_xet_bin(), repo)
        .arg("filter-process")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn the_filter_speaks_the_protocol_and_refuses_garbage() {
    let env = GitEnv::with_agent(&[]);
    let repo = env.init_repo("repo");
    let mut input = list(&["git-filter-client", "version=2"]);
    input.extend(list(&[
        "capability=clean",
        "capability=smudge",
        "capability=delay",
    ]));
    let handshake = input.clone();
    // clean "hello"
    input.extend(list(&["command=clean", "pathname=a.bin"]));
    input.extend(content(b"hello"));
    // smudge a pointer whose object is missing, with no remote to fetch it from (git-lfs
    // cannot either)
    let missing = "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n";
    input.extend(list(&["command=smudge", "pathname=b.bin"]));
    input.extend(content(missing.as_bytes()));
    // the same, delayed: listed as available, then its error is the answer
    input.extend(list(&["command=smudge", "pathname=c.bin", "can-delay=1"]));
    input.extend(content(missing.as_bytes()));
    input.extend(list(&["command=list_available_blobs"]));
    input.extend(list(&["command=smudge", "pathname=c.bin"]));
    input.extend(content(b""));
    input.extend(list(&["command=list_available_blobs"]));
    let out = run_filter(&env, &repo, &input);
    assert!(out.status.success(), "{}", stderr(&out));
    let pointer = "version https://git-lfs.github.com/spec/v1\noid sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824\nsize 5\n";
    let mut expected = list(&["git-filter-server", "version=2"]);
    expected.extend(list(&[
        "capability=clean",
        "capability=smudge",
        "capability=delay",
    ]));
    expected.extend(list(&["status=success"]));
    expected.extend(content(pointer.as_bytes()));
    expected.extend(list(&[])); // keep the status

    // XET cannot fetch it (no remote), so git-lfs gets its turn: `git lfs smudge` writes
    // the pointer and fails, and the error after the content is the answer git keeps.
    let handed_off = |expected: &mut Vec<u8>| {
        expected.extend(list(&["status=success"]));
        expected.extend(content(missing.as_bytes()));
        expected.extend(list(&["status=error"]));
    };
    handed_off(&mut expected);
    expected.extend(list(&["status=delayed"]));
    expected.extend(list(&["pathname=c.bin"]));
    expected.extend(list(&["status=success"]));
    handed_off(&mut expected);
    expected.extend(list(&[])); // nothing more delayed
    expected.extend(list(&["status=success"]));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&expected)
    );
    assert!(stderr(&out).contains("smudge of b.bin"), "{}", stderr(&out));
    assert_file_is(
        &repo.join(".git/lfs/objects/2c/f2/2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"),
        b"hello",
    );

    // Garbage, a truncated request and an unknown command end the process with a clear
    // error instead of a hang or a panic.
    let mut truncated = handshake.clone();
    truncated.extend(list(&["command=clean"]));
    truncated.extend(pkt(b"partial content"));
    let mut unknown = handshake.clone();
    unknown.extend(list(&["command=frobnicate"]));
    for (input, expect) in [
        (b"zzzz".to_vec(), "invalid packet length"),
        (
            [pkt(b"hello\n"), b"0000".to_vec()].concat(),
            "git-filter-client",
        ),
        (truncated, "middle of a request"),
        (unknown, "unknown command"),
    ] {
        let out = run_filter(&env, &repo, &input);
        assert!(!out.status.success());
        let err = stderr(&out);
        assert!(err.contains(expect) && !err.contains("panicked"), "{err}");
    }
}
