//! The protocol-core commands (`git xet xorb|shard|hash|chunk`) as a user runs them.

use crate::support::xorbs::small_xorb;

use crate::common::random_bytes;

/// The commands report bad input as one line on stderr with a non-zero exit.
#[test]
fn commands_report_bad_input_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk");
    std::fs::write(&junk, random_bytes(5000, 3)).unwrap();
    let bin = crate::support::git_xet_bin();
    let bin = &bin;
    let run = |args: &[&str]| std::process::Command::new(bin).args(args).output().unwrap();
    let junk_s = junk.to_str().unwrap();
    let out_s = dir.path().join("out").to_str().unwrap().to_string();
    for args in [
        vec!["xorb", "inspect", junk_s],
        vec!["xorb", "extract", junk_s, "-o", &out_s],
        vec!["shard", "inspect", junk_s],
        vec!["hash", "/nonexistent/file"],
        vec!["chunk", "/nonexistent/file"],
    ] {
        let out = run(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("git-xet: error: "), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    assert!(
        !dir.path().join("out").exists(),
        "a failed extract left an output file"
    );

    // Chunk ranges outside the xorb are refused with a reason.
    let xorb = dir.path().join("x.xorb");
    std::fs::write(&xorb, small_xorb()).unwrap();
    let out = run(&[
        "xorb",
        "extract",
        xorb.to_str().unwrap(),
        "--chunks",
        "2..9",
        "-o",
        &out_s,
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("outside the xorb's 3 chunks"));
    let out = run(&[
        "xorb",
        "extract",
        xorb.to_str().unwrap(),
        "--chunks",
        "1..3",
        "-o",
        &out_s,
    ]);
    assert!(out.status.success());
}

/// A file the user names may be truncated by another program while `git xet hash` reads it:
/// the command then fails with a one-line error (or, had it finished first, prints a hash),
/// and is never killed by a signal. Mapping such a file made it die with SIGBUS.
#[test]
fn hash_survives_the_file_being_truncated_meanwhile() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.bin");
    // Sparse: 2 GiB to read, nothing written to disk.
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(2 << 30).unwrap();
    let child = std::process::Command::new(crate::support::git_xet_bin())
        .args(["hash", path.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Truncate once the command has the file open, while it is reading it.
    let fds = format!("/proc/{}/fd", child.id());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let opened = || {
        std::fs::read_dir(&fds)
            .into_iter()
            .flatten()
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target == path))
    };
    while !opened() {
        assert!(
            std::time::Instant::now() < deadline,
            "git xet hash never opened the file"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    file.set_len(4096).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), None, "killed by a signal: {stderr}");
    if out.status.success() {
        // Finished before the truncation: a whole answer.
        assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    } else {
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("shrank"), "{stderr}");
    }
}

/// Chunking split across threads (a helper cutting each block's second half, on by
/// default from three cores) gives the same hash as one chunker, and its cut is used.
#[test]
fn split_chunking_hashes_as_one_chunker_and_joins_the_halves() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.bin");
    std::fs::write(&path, random_bytes(24 << 20, 77)).unwrap();
    let hash = |split: &str| {
        let out = std::process::Command::new(crate::support::git_xet_bin())
            .args(["hash", path.to_str().unwrap()])
            .env(git_xet_io::pipeline::SPLIT_CHUNKING_ENV, split)
            .env("GIT_XET_LOG_LEVEL", "git_xet_io=debug")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (alone, _) = hash("0");
    let (split, log) = hash("1");
    assert_eq!(split, alone);
    let joined: usize = log
        .split("the helper's cut joined in ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no split chunking line in the log: {log}"));
    assert!(joined >= 4, "joined in {joined} of 6 blocks");
}
