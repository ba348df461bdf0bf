//! `git xet filter-process`, the `lfs` filter `git xet install` configures: what it stores
//! and checks out must be exactly what git-lfs's own filter would, and a checkout fetches
//! missing objects through XET by itself.

use std::io::Write;
use std::path::Path;

use crate::env::{assert_file_is, ok, remote_url, stderr, GitEnv};
use crate::support::{random_bytes, write_file, TestServer};

const XORB_SERVED: &str = "git_xet_xorb_bytes_served_total";
const BASIC_SERVED: &str = "git_xet_lfs_basic_bytes_served_total";

/// What `git lfs clean` makes of a file: the reference output.
fn git_lfs_clean(env: &GitEnv, repo: &Path, file: &Path) -> Vec<u8> {
    let out = env
        .command("git", repo)
        .args(["lfs", "clean", "--"])
        .arg(file.file_name().unwrap())
        .stdin(std::fs::File::open(file).unwrap())
        .output()
        .unwrap();
    ok(out, "git lfs clean").stdout
}

fn blob(env: &GitEnv, repo: &Path, spec: &str) -> Vec<u8> {
    ok(
        env.git_output(repo, &["cat-file", "blob", spec]),
        "cat-file",
    )
    .stdout
}

#[test]
fn clean_stores_what_git_lfs_would() {
    let env = GitEnv::with_agent(&[]);
    let repo = env.lfs_repo("repo", "http://127.0.0.1:9/none.git");
    let pointer_text = b"version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n";
    let mut pointer_like = pointer_text.to_vec();
    pointer_like.extend_from_slice(&random_bytes(2000, 5));
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("big.bin", random_bytes(3 << 20, 1)),
        ("small.bin", b"small".to_vec()),
        ("empty.bin", Vec::new()),
        ("already-a-pointer.bin", pointer_text.to_vec()),
        ("pointer-then-data.bin", pointer_like),
    ];
    for (name, bytes) in &files {
        write_file(&repo.join(name), bytes);
    }
    let out = env
        .command("git", &repo)
        .args(["add", "."])
        .env("GIT_TRACE", "1")
        .output()
        .unwrap();
    let trace = stderr(&ok(out, "git add"));
    assert!(
        trace.contains("git-xet filter-process"),
        "git ran git-xet as the filter:\n{trace}"
    );
    assert_eq!(
        std::fs::read_dir(repo.join(".git/lfs/tmp"))
            .unwrap()
            .count(),
        0,
        "no temp files left"
    );
    for (name, bytes) in &files {
        let stored = blob(&env, &repo, &format!(":{name}"));
        assert_eq!(
            stored,
            git_lfs_clean(&env, &repo, &repo.join(name)),
            "{name}: git-xet's clean differs from git-lfs's"
        );
        if !bytes.is_empty() && *name != "already-a-pointer.bin" {
            let text = String::from_utf8(stored).unwrap();
            let oid = text
                .lines()
                .nth(1)
                .unwrap()
                .strip_prefix("oid sha256:")
                .unwrap();
            let object = repo
                .join(".git/lfs/objects")
                .join(&oid[0..2])
                .join(&oid[2..4])
                .join(oid);
            assert_file_is(&object, bytes);
        }
    }
    env.git(&repo, &["commit", "-qm", "files"]);
    // The pointer committed as content is not an object git-lfs has; everything else is.
    let fsck = env.git_output(&repo, &["lfs", "fsck", "--objects"]);
    let text = format!("{}{}", String::from_utf8_lossy(&fsck.stdout), stderr(&fsck));
    assert!(
        text.contains("already-a-pointer.bin") && !text.contains("big.bin"),
        "{text}"
    );
}

#[test]
fn smudge_passes_other_content_through_and_skips_on_request() {
    let env = GitEnv::with_agent(&[]);
    let repo = env.init_repo("repo");
    // Committed before the attributes exist, so these blobs are plain content.
    let long = random_bytes(5000, 2);
    write_file(&repo.join("long.bin"), &long);
    write_file(&repo.join("short.bin"), b"not a pointer");
    env.git(&repo, &["add", "."]);
    env.git(&repo, &["commit", "-qm", "plain"]);
    env.git(&repo, &["lfs", "track", "*.bin"]);
    let lfs = random_bytes(200_000, 3);
    write_file(&repo.join("lfs.bin"), &lfs);
    env.git(&repo, &["add", ".gitattributes", "lfs.bin"]);
    env.git(&repo, &["commit", "-qm", "lfs"]);
    for name in ["long.bin", "short.bin", "lfs.bin"] {
        std::fs::remove_file(repo.join(name)).unwrap();
    }
    env.git(&repo, &["checkout", "--", "."]);
    assert_file_is(&repo.join("long.bin"), &long);
    assert_file_is(&repo.join("short.bin"), b"not a pointer");
    assert_file_is(&repo.join("lfs.bin"), &lfs);

    // GIT_LFS_SKIP_SMUDGE checks out the pointer, and the tree stays clean.
    let clone = env.dir("clone");
    let out = env
        .command("git", &env.dir("."))
        .args([
            "clone",
            "-q",
            repo.to_str().unwrap(),
            clone.to_str().unwrap(),
        ])
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    ok(out, "clone with GIT_LFS_SKIP_SMUDGE");
    assert_eq!(
        std::fs::read(clone.join("lfs.bin")).unwrap(),
        blob(&env, &repo, "HEAD:lfs.bin")
    );
    assert_eq!(env.git(&clone, &["status", "--porcelain", "lfs.bin"]), "");

    // A clone from a local path: not an HTTP server, so git-lfs reads the objects itself.
    // Like git-lfs's filter, git-xet's gives the new clone git-lfs's hooks (pre-push).
    let local = env.dir("local");
    env.git(
        &env.dir("."),
        &[
            "clone",
            "-q",
            repo.to_str().unwrap(),
            local.to_str().unwrap(),
        ],
    );
    assert_file_is(&local.join("lfs.bin"), &lfs);
    assert!(local.join(".git/hooks/pre-push").exists());

    // With core.hooksPath (relative: to the work tree's top) they go there, even though
    // .git/hooks already has them: the next filter run (an add) installs them.
    env.git(&local, &["config", "core.hooksPath", "team-hooks"]);
    write_file(&local.join("new.bin"), b"new content");
    env.git(&local, &["add", "new.bin"]);
    assert!(local.join("team-hooks/pre-push").exists());
}

#[test]
fn a_checkout_fetches_missing_objects_through_xet_by_itself() {
    let server = TestServer::start();
    let remote = remote_url(&server, "org/filter", "write");
    let alice = GitEnv::with_agent(&[]);
    let a = alice.lfs_repo("a", &remote);
    let v1 = random_bytes(4 << 20, 11);
    let other = random_bytes(300_000, 12);
    write_file(&a.join("model.bin"), &v1);
    write_file(&a.join("sub/other.bin"), &other);
    alice.commit_all_and_push(&a, "v1");

    // Bob has the filter but no transfer agent: git-lfs on its own could only use basic.
    // model.bin is over his streaming threshold: it comes to git while it is downloaded,
    // where other.bin waits for the delayed batch.
    let bob = GitEnv::with_agent(&[]).with_env("GIT_XET_STREAM_THRESHOLD", "1000000");
    let dir = bob.dir(".");
    bob.git(
        &dir,
        &[
            "config",
            "--global",
            "--remove-section",
            "lfs.customtransfer.xet",
        ],
    );
    let b = bob.dir("b");
    let out = bob.git_logged(&dir, &["clone", "-q", &remote, b.to_str().unwrap()]);
    ok(out, "clone");
    assert_file_is(&b.join("model.bin"), &v1);
    assert_file_is(&b.join("sub/other.bin"), &other);
    let log = bob.agent_log();
    assert!(
        log.contains("streamed model.bin") && !log.contains("streamed sub/other.bin"),
        "model.bin streamed, other.bin delayed:\n{log}"
    );
    // The filter process blocked on one async runtime for the batch requests and the
    // downloads alike: every git-xet process built at most one.
    let built: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(git_xet_io::runtime::BUILT_EVENT))
        .collect();
    assert!(
        !built.is_empty(),
        "the filter fetched without a runtime?\n{log}"
    );
    assert!(built.iter().all(|l| l.contains("built=1")), "{built:#?}");
    assert!(server.metric(XORB_SERVED) > 0.0);
    assert_eq!(
        server.metric(BASIC_SERVED),
        0.0,
        "nothing went through basic"
    );
    bob.lfs_fsck(&b);
    assert_eq!(bob.git(&b, &["status", "--porcelain"]), "");
    assert_eq!(
        std::fs::read_dir(b.join(".git/lfs/tmp")).unwrap().count(),
        0,
        "no temp files left"
    );

    // A second version: the pull fetches only the changed part.
    let mut v2 = v1.clone();
    v2[2 << 20..(2 << 20) + 4096].copy_from_slice(&random_bytes(4096, 13));
    write_file(&a.join("model.bin"), &v2);
    alice.git(&a, &["commit", "-qam", "v2"]);
    alice.git(&a, &["push", "-q", "origin", "main"]);
    let served = server.metric(XORB_SERVED);
    bob.git(&b, &["pull", "-q", "origin", "main"]);
    assert_file_is(&b.join("model.bin"), &v2);
    bob.lfs_fsck(&b);
    let pulled = server.metric(XORB_SERVED) - served;
    assert!(
        pulled > 0.0 && pulled < (512 << 10) as f64,
        "pull of a 4 KiB edit fetched {pulled} bytes"
    );
}

#[test]
fn servers_without_xet_are_left_to_git_lfs() {
    let server = TestServer::start_with(&["--basic-only"]);
    let remote = remote_url(&server, "org/plain", "write");
    let alice = GitEnv::plain_lfs();
    let a = alice.lfs_repo("a", &remote);
    let data = random_bytes(1 << 20, 21);
    write_file(&a.join("data.bin"), &data);
    alice.commit_all_and_push(&a, "data");

    let bob = GitEnv::with_agent(&[]);
    let b = bob.dir("b");
    bob.git(
        &bob.dir("."),
        &["clone", "-q", &remote, b.to_str().unwrap()],
    );
    assert_file_is(&b.join("data.bin"), &data);
    assert!(server.metric(BASIC_SERVED) >= data.len() as f64);
    bob.lfs_fsck(&b);
}

#[test]
fn cleans_of_stored_content_compare_without_storing_and_changes_are_still_caught() {
    let env = GitEnv::with_agent(&[]);
    let repo = env.lfs_repo("repo", "http://127.0.0.1:9/none.git");
    let path = repo.join("model.bin");
    let v1 = random_bytes(17 << 20, 31);
    write_file(&path, &v1);
    env.git(&repo, &["add", "."]);
    env.git(&repo, &["commit", "-qm", "v1"]);
    let pointer_v1 = blob(&env, &repo, ":model.bin");
    let stored = |oid: &str| {
        repo.join(".git/lfs/objects")
            .join(&oid[0..2])
            .join(&oid[2..4])
            .join(oid)
    };
    let oid_v1 = String::from_utf8(pointer_v1.clone()).unwrap();
    let oid_v1 = oid_v1
        .lines()
        .find_map(|l| l.strip_prefix("oid sha256:"))
        .unwrap();

    // Unchanged (a re-check), then only touched: compared with the stored object, not
    // written again.
    ok(
        env.git_logged(&repo, &["add", "--renormalize", "model.bin"]),
        "git add --renormalize",
    );
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(later)
        .unwrap();
    ok(env.git_logged(&repo, &["add", "model.bin"]), "git add");
    let log = env.agent_log();
    assert_eq!(
        log.matches("comparing the file with its stored version")
            .count(),
        2,
        "{log}"
    );
    assert!(!log.contains("differs"), "{log}");
    assert_eq!(blob(&env, &repo, ":model.bin"), pointer_v1);
    assert_file_is(&stored(oid_v1), &v1);

    // A damaged stored copy differs from the file, whose content has its oid all the same:
    // the stored copy is replaced by the file's content.
    let mut damaged = v1.clone();
    damaged[9 << 20] ^= 0x40;
    std::fs::write(stored(oid_v1), &damaged).unwrap();
    ok(
        env.git_logged(&repo, &["add", "--renormalize", "model.bin"]),
        "git add --renormalize",
    );
    let log = env.agent_log();
    assert!(log.contains("was damaged: replaced it"), "{log}");
    assert_eq!(blob(&env, &repo, ":model.bin"), pointer_v1);
    assert_file_is(&stored(oid_v1), &v1);
    env.lfs_fsck(&repo);

    // Changed in place with the same size: once with the same mtime (so the index's stat
    // data still matches), once at the very last byte. The difference is found, and the new
    // content is stored (with its prefix read back from the stored version).
    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    let mut v2 = v1.clone();
    v2[5 << 20..(5 << 20) + 100].copy_from_slice(&random_bytes(100, 32));
    let mut v3 = v2.clone();
    *v3.last_mut().unwrap() ^= 1;
    for (n, version) in [(1, &v2), (2, &v3)] {
        {
            let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            f.write_all(version).unwrap();
            f.set_modified(modified).unwrap();
        }
        ok(
            env.git_logged(&repo, &["add", "--renormalize", "model.bin"]),
            "git add --renormalize",
        );
        let log = env.agent_log();
        assert_eq!(
            log.matches("differs from its stored version").count(),
            n + 1,
            "{log}"
        );
        let pointer = String::from_utf8(blob(&env, &repo, ":model.bin")).unwrap();
        assert_eq!(pointer.as_bytes(), git_lfs_clean(&env, &repo, &path));
        let oid = pointer
            .lines()
            .find_map(|l| l.strip_prefix("oid sha256:"))
            .unwrap();
        assert_file_is(&stored(oid), version);
        assert_eq!(
            std::fs::read_dir(repo.join(".git/lfs/tmp"))
                .unwrap()
                .count(),
            0
        );
        env.git(&repo, &["commit", "-qm", &format!("v{}", n + 1)]);
    }
    env.lfs_fsck(&repo);
}

/// A large object can take minutes to come in, while git shows nothing: on a terminal, the
/// filter names it and shows a progress bar; elsewhere it stays quiet.
#[test]
fn a_streamed_download_shows_progress_only_on_a_terminal() {
    let server = TestServer::start();
    let remote = remote_url(&server, "org/progress", "write");
    let alice = GitEnv::with_agent(&[]);
    let a = alice.lfs_repo("a", &remote);
    let data = random_bytes(48 << 20, 21);
    write_file(&a.join("model.bin"), &data);
    alice.commit_all_and_push(&a, "v1");

    let bob = GitEnv::with_agent(&[]).with_env("GIT_XET_STREAM_THRESHOLD", "1000000");
    let dir = bob.dir(".");
    let b = bob.dir("b");
    let typescript = dir.join("typescript");
    // script(1) runs the clone on a pseudo-terminal and records what it showed.
    let clone = format!("git clone -q '{remote}' '{}'", b.display());
    let out = bob
        .command("script", &dir)
        .args(["-qec", &clone, typescript.to_str().unwrap()])
        .output()
        .expect("run script(1) from util-linux");
    ok(out, "clone on a terminal");
    assert_file_is(&b.join("model.bin"), &data);
    let shown = String::from_utf8_lossy(&std::fs::read(&typescript).unwrap()).into_owned();
    assert!(
        shown.contains("git-xet: downloading model.bin (48.0 MiB)"),
        "no download line:\n{shown}"
    );
    // The bar moved: a position past zero was drawn.
    let moved = shown.split("/48.00 MiB").any(|before| {
        let position = before.rsplit(']').next().unwrap_or("").trim();
        !position.is_empty() && position != "0 B"
    });
    assert!(moved, "the progress bar never moved:\n{shown}");

    let c = bob.dir("c");
    let out = bob.git_output(&dir, &["clone", "-q", &remote, c.to_str().unwrap()]);
    assert_file_is(&c.join("model.bin"), &data);
    let said = stderr(&out);
    assert!(
        !said.contains("git-xet") && !said.contains("MiB"),
        "progress without a terminal:\n{said}"
    );
}

/// LFS Batch API requests the server has answered.
fn batch_requests(server: &TestServer) -> f64 {
    server
        .metrics()
        .lines()
        .filter(|l| l.starts_with("git_xet_http_requests_total{route=\"lfs_batch\""))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

#[test]
fn a_clone_of_many_files_fetches_them_together() {
    let server = TestServer::start();
    let remote = remote_url(&server, "org/many", "write");
    let alice = GitEnv::with_agent(&[]);
    let a = alice.lfs_repo("a", &remote);
    // More objects than one Batch API request takes (BATCH_SIZE 100).
    let files: Vec<(String, Vec<u8>)> = (0..230)
        .map(|i| {
            (
                format!("data/{i:03}.bin"),
                random_bytes(2_000 + i, 100 + i as u64),
            )
        })
        .collect();
    for (name, bytes) in &files {
        write_file(&a.join(name), bytes);
    }
    // Two more files with the content of the first: fetched once.
    write_file(&a.join("copy1.bin"), &files[0].1);
    write_file(&a.join("copy2.bin"), &files[0].1);
    alice.commit_all_and_push(&a, "many");

    let bob = GitEnv::with_agent(&[]);
    let b = bob.dir("b");
    let before = batch_requests(&server);
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
    assert_file_is(&b.join("copy2.bin"), &files[0].1);
    let requests = batch_requests(&server) - before;
    assert_eq!(
        requests, 3.0,
        "three batch requests for 230 objects, not one per file"
    );
    assert_eq!(server.metric(BASIC_SERVED), 0.0);
    bob.lfs_fsck(&b);
}

/// The oid in the pointer git stored for `path` in the index.
fn staged_oid(env: &GitEnv, repo: &Path, path: &str) -> String {
    let text = String::from_utf8(blob(env, repo, &format!(":{path}"))).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("oid sha256:"))
        .expect("a pointer")
        .to_string()
}

#[test]
fn a_push_reads_only_new_chunks_from_the_list_clean_saved_and_survives_a_wrong_list() {
    use git_xet_client::chunk_lists::{ChunkList, ChunkListStore};
    let server = TestServer::start();
    let remote = remote_url(&server, "org/listed", "write");
    let alice = GitEnv::with_agent(&[]);
    let bob = GitEnv::with_agent(&[]);
    let a = alice.lfs_repo("a", &remote);
    let lists = ChunkListStore::new(&a.join(".git/xet"));

    // `git add` records the chunks of a large file; the push uses them.
    let v1 = random_bytes(9 << 20, 61);
    write_file(&a.join("model.bin"), &v1);
    write_file(&a.join("small.bin"), &random_bytes(100_000, 62));
    alice.git(&a, &["add", "."]);
    let oid1 = staged_oid(&alice, &a, "model.bin");
    let sha1 = oid1.parse::<git_xet_lfs::pointer::Oid>().unwrap().0;
    let list = lists
        .load(&sha1, v1.len() as u64)
        .expect("clean saved a chunk list");
    let reference = git_xet_io::pipeline::hash_stream(&v1[..], false).unwrap();
    assert_eq!(list.file_hash, reference.file_hash);
    let small = staged_oid(&alice, &a, "small.bin");
    assert!(
        !a.join(".git/xet/chunk-lists").join(&small).exists(),
        "small files are chunked at push time"
    );
    alice.git(&a, &["commit", "-qm", "v1"]);
    let out = alice.git_logged(&a, &["push", "-q", "origin", "main"]);
    ok(out, "push v1");
    assert!(
        alice.agent_log().contains("uploaded from its chunk list"),
        "{}",
        alice.agent_log()
    );
    assert!(
        lists.load(&sha1, v1.len() as u64).is_none(),
        "a list is dropped once its file is on the server"
    );

    // A list that does not describe the file (same size, other content) is caught on the
    // first new chunk, dropped, and the file is chunked instead.
    let v2 = random_bytes(9 << 20, 63);
    write_file(&a.join("model.bin"), &v2);
    alice.git(&a, &["add", "model.bin"]);
    let oid2 = staged_oid(&alice, &a, "model.bin");
    // Committed first: git may clean the file again (racily clean), saving a right list.
    alice.git(&a, &["commit", "-qm", "v2"]);
    let sha2 = oid2.parse::<git_xet_lfs::pointer::Oid>().unwrap().0;
    let other = random_bytes(9 << 20, 64);
    let mut feed = git_xet_io::pipeline::ChunkFeed::new();
    feed.feed(&other);
    let chunked = feed.finish().unwrap();
    lists
        .save(&ChunkList {
            sha256: sha2,
            file_hash: chunked.summary.file_hash,
            chunks: chunked.chunks,
        })
        .unwrap();
    let out = alice.git_logged(&a, &["push", "-q", "origin", "main"]);
    ok(out, "push v2");
    let log = alice.agent_log();
    assert!(
        log.contains("does not match its chunk list") && log.contains("chunking the whole file"),
        "{log}"
    );
    assert!(
        lists.load(&sha2, v2.len() as u64).is_none(),
        "the wrong list is gone"
    );

    let b = bob.dir("b");
    bob.git(
        &bob.dir("."),
        &["clone", "-q", &remote, b.to_str().unwrap()],
    );
    assert_file_is(&b.join("model.bin"), &v2);
    bob.git(&b, &["checkout", "-q", "HEAD~1"]);
    assert_file_is(&b.join("model.bin"), &v1);
    bob.lfs_fsck(&b);
}

/// `GIT_XET_PORTABLE_PLATFORM=1` makes the filter and the agent take the fallbacks that other
/// unixes build (no splice or pipe resizing, ranges read instead of mapped, std's positioned
/// reads): a push, a clone and a re-clean of stored content still give git-lfs's bytes.
#[test]
fn the_portable_platform_fallbacks_store_and_check_out_the_same_content() {
    let server = TestServer::start();
    let remote = remote_url(&server, "org/portable", "write");
    let portable = || GitEnv::with_agent(&[]).with_env("GIT_XET_PORTABLE_PLATFORM", "1");
    let alice = portable();
    let a = alice.lfs_repo("a", &remote);
    // Over one pipeline block (4 MiB), so the clean filter chunks it as it goes by and the push
    // plans it from the saved chunk list through the mapper.
    let v1 = random_bytes(6 << 20, 31);
    write_file(&a.join("model.bin"), &v1);
    alice.git(&a, &["add", "."]);
    alice.git(&a, &["commit", "-qm", "v1"]);
    let out = alice.git_logged(&a, &["push", "-q", "origin", "main"]);
    ok(out, "push");
    assert_eq!(
        blob(&alice, &a, "HEAD:model.bin"),
        git_lfs_clean(&alice, &a, &a.join("model.bin")),
        "the pointer is git-lfs's"
    );
    let log = alice.agent_log();
    assert!(
        log.contains("taking the portable platform fallbacks"),
        "the switch took effect:\n{log}"
    );

    let bob = portable();
    let dir = bob.dir(".");
    let b = bob.dir("b");
    ok(
        bob.git_logged(&dir, &["clone", "-q", &remote, b.to_str().unwrap()]),
        "clone",
    );
    assert_file_is(&b.join("model.bin"), &v1);
    assert!(
        server.metric(XORB_SERVED) > 0.0,
        "the clone went through XET"
    );
    assert_eq!(
        server.metric(BASIC_SERVED),
        0.0,
        "nothing went through basic"
    );
    bob.lfs_fsck(&b);
    // A racily clean file is cleaned again by comparing with the stored object.
    let file = std::fs::File::options()
        .append(true)
        .open(b.join("model.bin"))
        .unwrap();
    file.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
        .unwrap();
    drop(file);
    assert_eq!(bob.git(&b, &["status", "--porcelain"]), "");
    let log = bob.agent_log();
    assert!(
        log.contains("taking the portable platform fallbacks"),
        "the switch took effect:\n{log}"
    );
}
