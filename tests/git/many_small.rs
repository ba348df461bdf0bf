//! Many small files down: a clone and a pull ask for their reconstructions together (a
//! handful of batch queries, not one query per file) and fetch files that share a xorb
//! together, stay bit-exact, and a damaged object is still refused.

use std::path::{Path, PathBuf};

use crate::env::{assert_file_is, ok, remote_url, stderr, GitEnv};
use crate::support::{count_files, lfs_objects, random_bytes, write_file, TestServer};

/// Reconstruction queries of every kind the server answered.
fn reconstruction_requests(server: &TestServer) -> u64 {
    [
        "reconstruction",
        "reconstruction_v2",
        "reconstruction_batch",
    ]
    .iter()
    .map(|r| server.requests(r))
    .sum()
}

fn small_files(n: usize, seed: u64) -> Vec<(String, Vec<u8>)> {
    (0..n)
        .map(|i| {
            (
                format!("d/{i:03}.bin"),
                random_bytes(1_000 + 7 * i, seed + i as u64),
            )
        })
        .collect()
}

#[test]
fn a_clone_and_a_pull_of_many_small_files_ask_for_their_reconstructions_together() {
    let server = TestServer::start();
    let remote = remote_url(&server, "org/small", "write");
    let alice = GitEnv::with_agent(&[]);
    let a = alice.lfs_repo("a", &remote);
    let mut files = small_files(300, 1000);
    for (name, bytes) in &files {
        write_file(&a.join(name), bytes);
    }
    alice.commit_all_and_push(&a, "many");

    let bob = GitEnv::with_agent(&[]);
    let b = bob.dir("b");
    let (queries, xorbs) = (
        reconstruction_requests(&server),
        server.requests("xorb_data"),
    );
    ok(
        bob.git_logged(
            &bob.dir("."),
            &["clone", "-q", &remote, b.to_str().unwrap()],
        ),
        "clone",
    );
    for (name, bytes) in &files {
        assert_file_is(&b.join(name), bytes);
    }
    let queries = reconstruction_requests(&server) - queries;
    let xorbs = server.requests("xorb_data") - xorbs;
    eprintln!("clone of 300 files: {queries} reconstruction queries, {xorbs} xorb GETs");
    // Three batch queries of 100 files; one per file before.
    assert!(
        queries <= 6,
        "{queries} reconstruction queries for 300 files"
    );
    assert!(server.requests("reconstruction_batch") >= 3);
    // Files pushed together sit side by side in shared xorbs: one ranged GET brings a run
    // of them (one GET per file before).
    assert!(xorbs <= 150, "{xorbs} xorb GETs for 300 files");
    bob.lfs_fsck(&b);

    // A third of the files change: the pull brings them the same way.
    for (i, (name, bytes)) in files.iter_mut().enumerate().filter(|(i, _)| i % 3 == 0) {
        *bytes = random_bytes(900 + 11 * i, 5000 + i as u64);
        write_file(&a.join(name.as_str()), bytes);
    }
    alice.git(&a, &["commit", "-qam", "changed"]);
    alice.git(&a, &["push", "-q", "origin", "main"]);
    let queries = reconstruction_requests(&server);
    ok(
        bob.git_logged(&b, &["pull", "-q", "origin", "main"]),
        "pull",
    );
    for (name, bytes) in &files {
        assert_file_is(&b.join(name), bytes);
    }
    let queries = reconstruction_requests(&server) - queries;
    eprintln!("pull of 100 changed files: {queries} reconstruction queries");
    assert!(
        queries <= 2,
        "{queries} reconstruction queries for 100 files"
    );
    bob.lfs_fsck(&b);
    assert_eq!(bob.git(&b, &["status", "--porcelain"]), "");
}

/// The stored xorbs of a test server's data directory.
fn stored_xorbs(data: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![data.join("xorbs")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "xorb") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// Pushes `count` small files (content from `seed`) to `repo`, each its own xorb (no shared
/// upload sessions, so damaging one xorb damages exactly one file and each download is a
/// GET of its own), then damages the first stored xorb. Returns the remote and the files.
fn push_with_one_damaged_xorb(
    server: &TestServer,
    repo: &str,
    count: usize,
    seed: u64,
) -> (String, Vec<(String, Vec<u8>)>) {
    let remote = remote_url(server, repo, "write");
    let alice = GitEnv::with_agent(&[]).with_env("GIT_XET_SHARED_UPLOADS", "0");
    let a = alice.lfs_repo("a", &remote);
    let files = small_files(count, seed);
    for (name, bytes) in &files {
        write_file(&a.join(name), bytes);
    }
    alice.commit_all_and_push(&a, "many");
    let xorbs = stored_xorbs(&server.data);
    assert_eq!(xorbs.len(), files.len(), "one xorb per pushed file");
    let mut bytes = std::fs::read(&xorbs[0]).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 16] {
        *b ^= 0xA5;
    }
    std::fs::write(&xorbs[0], bytes).unwrap();
    (remote, files)
}

#[test]
fn a_damaged_small_object_of_a_batched_clone_is_refused_and_the_rest_are_stored() {
    let server = TestServer::start();
    let (remote, files) = push_with_one_damaged_xorb(&server, "org/damaged", 40, 7000);

    let bob = GitEnv::with_agent(&[]);
    let b = bob.dir("b");
    let before = server.requests("reconstruction_batch");
    let out = bob.git_logged(&bob.dir("."), &["clone", &remote, b.to_str().unwrap()]);
    let err = stderr(&out);
    eprintln!("clone with one damaged object said:\n{err}");
    assert!(
        server.requests("reconstruction_batch") > before,
        "the batched path ran"
    );
    assert!(
        !out.status.success() || err.contains("error"),
        "the failure must be reported:\n{err}"
    );
    // git stops the checkout at the failed file (the filter is required): the work tree
    // holds exact files, and pointers or nothing for the rest, never unverified data.
    let wrong: Vec<&String> = files
        .iter()
        .filter(|(name, bytes)| std::fs::read(b.join(name)).unwrap_or_default() != *bytes)
        .map(|(name, _)| name)
        .collect();
    assert!(!wrong.is_empty(), "the damaged file cannot have arrived");
    for name in &wrong {
        let in_tree = std::fs::read(b.join(name)).unwrap_or_default();
        assert!(in_tree.len() < 200, "{name}: {} bytes", in_tree.len());
    }
    // The batch brought and verified every other object; the damaged one is not stored:
    // neither whole nor in the chunk store, which records each verified object's
    // reconstruction by oid (docs/store.md).
    let recorded = count_files(&bob.store_dir().join("files/by-sha256"));
    assert_eq!(
        recorded,
        files.len() - 1,
        "the damaged object is not stored"
    );
    assert!(lfs_objects(&b) < files.len());
}

/// git cleans again every file a checkout wrote in the second it wrote its index (after a
/// clone of many small files: all of them), at the next command that reads the index. Such
/// a clean of a small stored file writes nothing (it was a temp file written and deleted per
/// file), and the whole copies the checkout dropped leave no empty directories for every
/// later download to walk.
#[test]
fn re_cleans_of_small_checked_out_files_write_nothing_and_leave_no_empty_directories() {
    let (_server, files, bob, b) = pushed_and_cloned("org/reclean", 40, 9000);
    let objects = b.join(".git/lfs/objects");
    let left: Vec<_> = std::fs::read_dir(&objects)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left in .git/lfs/objects: {left:?}");

    let tmp = b.join(".git/lfs/tmp");
    let past = age_files(&b, &files, 1_500_000_000);
    ok(
        bob.git_logged(&b, &["update-index", "--refresh"]),
        "refresh",
    );
    assert_eq!(bob.git(&b, &["status", "--porcelain"]), "");
    let touched = std::fs::metadata(&tmp).unwrap().modified().unwrap();
    assert_eq!(touched, past, "a re-clean wrote into .git/lfs/tmp");
    for (name, bytes) in &files {
        assert_file_is(&b.join(name), bytes);
    }
    // The re-cleans stored no whole copies either: the chunk store holds the objects.
    assert_eq!(count_files(&objects), 0);
}

/// `count` small files (from `seed`) pushed to a new repository `name` of a new server by
/// one user and cloned by another, who keeps no whole objects (`xet.keepCheckedOut=false`:
/// the chunk store holds them, so a re-clean has only the store to compare with): the
/// server (keep it alive), the files, the cloning user's environment and clone.
fn pushed_and_cloned(
    name: &str,
    count: usize,
    seed: u64,
) -> (
    TestServer,
    Vec<(String, Vec<u8>)>,
    GitEnv,
    std::path::PathBuf,
) {
    let server = TestServer::start();
    let remote = remote_url(&server, name, "write");
    let alice = GitEnv::with_agent(&[]);
    let a = alice.lfs_repo("a", &remote);
    let files = small_files(count, seed);
    for (name, bytes) in &files {
        write_file(&a.join(name), bytes);
    }
    alice.commit_all_and_push(&a, "many");
    let bob = GitEnv::with_agent(&[]);
    bob.git(
        &bob.dir("."),
        &["config", "--global", "xet.keepCheckedOut", "false"],
    );
    let b = bob.clone_ok(&remote, "b");
    (server, files, bob, b)
}

/// New stat data, same content: git cleans every file again to compare. Sets the files'
/// (and `.git/lfs/tmp`'s) modification time to `secs` after 1970, which it returns.
fn age_files(repo: &Path, files: &[(String, Vec<u8>)], secs: u64) -> std::time::SystemTime {
    let tmp = repo.join(".git/lfs/tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let past = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    std::fs::File::open(&tmp)
        .unwrap()
        .set_modified(past)
        .unwrap();
    for (name, _) in files {
        let file = std::fs::File::options()
            .write(true)
            .open(repo.join(name))
            .unwrap();
        file.set_modified(past).unwrap();
    }
    past
}

/// Whether a re-clean's object is the index's is read from git's index file by the filter
/// itself: no `git cat-file` starts (`GIT_TRACE` lists every git command the filter runs).
/// A split index, which that reader leaves to git, gets the same answer through cat-file.
#[test]
fn re_cleans_of_checked_out_files_read_the_index_file_not_cat_file() {
    let (_server, files, bob, b) = pushed_and_cloned("org/reclean-index", 30, 12000);
    let objects = b.join(".git/lfs/objects");
    for split in [false, true] {
        if split {
            bob.git(&b, &["update-index", "--split-index"]);
            assert!(std::fs::read_dir(b.join(".git"))
                .unwrap()
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("sharedindex.")));
        }
        age_files(&b, &files, 1_500_000_000 + 1000 * u64::from(split));
        let trace = bob.dir(".").join(format!("trace-{split}"));
        let out = bob
            .command("git", &b)
            .args(["update-index", "--refresh"])
            .env("GIT_TRACE", &trace)
            .output()
            .unwrap();
        ok(out, "refresh");
        let trace = std::fs::read_to_string(&trace).unwrap();
        let lines = |what: &str| trace.lines().filter(|l| l.contains(what)).count();
        assert!(lines("filter-process") > 0, "no filter ran:\n{trace}");
        match split {
            false => assert_eq!(lines("cat-file"), 0, "the filter asked git:\n{trace}"),
            true => assert!(lines("cat-file") > 0, "no fallback:\n{trace}"),
        }
        assert_eq!(
            bob.git(&b, &["status", "--porcelain"]),
            "",
            "split: {split}"
        );
        for (name, bytes) in &files {
            assert_file_is(&b.join(name), bytes);
        }
        // The chunk store holds the objects: no whole copies were written.
        assert_eq!(count_files(&objects), 0, "split: {split}");
    }
}

/// The delayed files listed in each `list_available_blobs` answer git received, from a
/// `GIT_TRACE_PACKET` file (`packet: clone> ...` what git sent, `clone< ...` what it got).
fn delayed_lists(trace: &str) -> Vec<Vec<String>> {
    let mut lists = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in trace.lines() {
        if line.contains("> command=list_available_blobs") {
            current = Some(Vec::new());
        } else if let Some(list) = &mut current {
            if let Some((_, path)) = line.split_once("< pathname=") {
                list.push(path.trim_end().to_string());
            } else if line.contains("< status=") {
                lists.push(current.take().unwrap());
            }
        }
    }
    lists
}

/// A checkout's delayed files are listed to git as their downloads finish, not all at the
/// end: every file once, bit-exact; an object whose download fails is listed too and
/// answered with its error when git asks for it; the last answer is empty and git has no
/// delayed file left.
#[test]
fn a_delayed_checkout_lists_files_as_their_downloads_finish() {
    let server = TestServer::start();
    let (remote, files) = push_with_one_damaged_xorb(&server, "org/waves", 120, 11000);

    // Whether a download finishes before git asks again is a matter of timing. A filter
    // that lists everything at the end never gives git two lists; one that lists files as
    // they finish does, all but always at the first try.
    let mut waves = Vec::new();
    for attempt in 0..3 {
        let trace = tempfile::NamedTempFile::new().unwrap();
        let bob =
            GitEnv::with_agent(&[]).with_env("GIT_TRACE_PACKET", trace.path().to_str().unwrap());
        let b = bob.dir("b");
        // git dies at the first file a required filter fails (the damaged-object test
        // above): here it goes on, so every other file must come.
        let out = bob.git_logged(
            &bob.dir("."),
            &[
                "clone",
                "-q",
                "-c",
                "filter.lfs.required=false",
                &remote,
                b.to_str().unwrap(),
            ],
        );
        let err = stderr(&out);
        let wrong: Vec<&String> = files
            .iter()
            .filter(|(name, bytes)| std::fs::read(b.join(name)).unwrap_or_default() != *bytes)
            .map(|(name, _)| name)
            .collect();
        assert_eq!(
            wrong.len(),
            1,
            "only the damaged file is missing: {wrong:?}\n{err}"
        );
        let in_tree = std::fs::read(b.join(wrong[0])).unwrap_or_default();
        assert!(in_tree.len() < 200, "{}: {} bytes", wrong[0], in_tree.len());
        assert!(
            err.contains(wrong[0].as_str()),
            "the failed object is reported:\n{err}"
        );
        assert!(
            !err.contains("not filtered properly"),
            "a delayed file was never listed:\n{err}"
        );

        let lists = delayed_lists(&std::fs::read_to_string(trace.path()).unwrap());
        assert_eq!(
            lists.last().map(Vec::len),
            Some(0),
            "the last answer is empty: {lists:?}"
        );
        let mut listed: Vec<&String> = lists.iter().flatten().collect();
        listed.sort();
        let delayed: Vec<&String> = files.iter().map(|(n, _)| n).collect();
        assert_eq!(listed, delayed, "each delayed file listed once");
        waves = lists.iter().map(Vec::len).filter(|&n| n > 0).collect();
        eprintln!("attempt {attempt}: files per list {waves:?}");
        if waves.len() > 1 {
            break;
        }
    }
    assert!(
        waves.len() > 1,
        "every delayed file came in one list: {waves:?}"
    );
}
