//! Stock git and git-lfs against the server: push, clone, pull over smart HTTP with the LFS
//! `basic` transfer, repository creation, access control, and the pre-receive hook.

use std::path::Path;

use crate::common::sha256_hex;
use crate::gitenv::GitEnv;
use crate::support::{git_xet_bin, git_xet_server_bin, random_bytes, write_file, TestServer};

fn remote(server: &TestServer, repo: &str) -> String {
    format!("{}/{repo}.git", server.url)
}

#[test]
fn git_lfs_push_and_clone_bit_exact_stored_as_xorbs() {
    let mut server = TestServer::start();
    let env = GitEnv::new(Some(&server.token("org/model", "write")));
    let work = env.home.path().join("work");
    env.new_repo(&work);
    let big = random_bytes(6_000_000, 60);
    let text: Vec<u8> = (0..2_000_000u32)
        .flat_map(|i| format!("line {i}\n").into_bytes())
        .take(2_000_000)
        .collect();
    write_file(&work.join("weights.bin"), &big);
    write_file(&work.join("data/corpus.bin"), &text);
    write_file(&work.join("README.md"), b"# model\n");
    env.git(&work, &["add", "."]);
    env.git(&work, &["commit", "-q", "-m", "first"]);
    env.git(
        &work,
        &["remote", "add", "origin", &remote(&server, "org/model")],
    );
    env.git(&work, &["push", "-q", "-u", "origin", "main"]);

    let received = server.metric("git_xet_lfs_basic_bytes_received_total");
    assert_eq!(received, (big.len() + text.len()) as f64);
    assert!(server.metric("git_xet_stored_xorbs") >= 1.0);
    assert!(
        server.metric("git_xet_stored_xorb_bytes") < received,
        "compressible text is stored compressed"
    );
    assert_eq!(server.metric("git_xet_registered_files"), 2.0);
    assert!(server.stored_count("xorbs") >= 1);
    // Hosted repositories run the server program's built-in check (fewer processes per push).
    let hook =
        std::fs::read_to_string(server.data.join("repos/org/model.git/hooks/pre-receive")).unwrap();
    assert!(hook.starts_with("#!/bin/sh\n"), "{hook}");
    assert!(hook.ends_with(" pre-receive\n"), "{hook}");
    let program = git_xet_server_bin().canonicalize().unwrap();
    assert!(
        hook.contains(&format!("exec '{}'", program.display())),
        "{hook}"
    );

    let clone = env.home.path().join("clone");
    env.git(
        env.home.path(),
        &[
            "clone",
            "-q",
            &remote(&server, "org/model"),
            clone.to_str().unwrap(),
        ],
    );
    assert_eq!(std::fs::read(clone.join("weights.bin")).unwrap(), big);
    assert_eq!(std::fs::read(clone.join("data/corpus.bin")).unwrap(), text);
    env.git(&clone, &["lfs", "fsck"]);

    // A second version: pushed, pulled, and mostly deduplicated on the server.
    let mut v2 = big.clone();
    v2[3_000_000..3_000_100].copy_from_slice(&[7u8; 100]);
    write_file(&work.join("weights.bin"), &v2);
    env.git(&work, &["commit", "-q", "-am", "second"]);
    let stored = server.metric("git_xet_stored_xorb_bytes");
    env.git(&work, &["push", "-q"]);
    let added = server.metric("git_xet_stored_xorb_bytes") - stored;
    assert!(added < 1_000_000.0, "second version added {added} bytes");
    env.git(&clone, &["pull", "-q"]);
    assert_eq!(std::fs::read(clone.join("weights.bin")).unwrap(), v2);

    // Everything is still served after a restart.
    server.restart();
    let again = env.home.path().join("again");
    env.git(
        env.home.path(),
        &[
            "clone",
            "-q",
            &remote(&server, "org/model"),
            again.to_str().unwrap(),
        ],
    );
    assert_eq!(std::fs::read(again.join("weights.bin")).unwrap(), v2);
    env.git(&again, &["checkout", "-q", "HEAD~1"]);
    assert_eq!(std::fs::read(again.join("weights.bin")).unwrap(), big);
}

#[test]
fn repositories_are_created_on_push_and_access_is_checked() {
    let server = TestServer::start();
    let reader = GitEnv::new(Some(&server.token("org/model", "read")));
    let nowhere = reader.home.path().join("nowhere");
    let err = reader.git_fails(
        reader.home.path(),
        &[
            "clone",
            "-q",
            &remote(&server, "org/model"),
            nowhere.to_str().unwrap(),
        ],
    );
    assert!(err.contains("not found") || err.contains("404"), "{err}");

    let work = reader.home.path().join("work");
    reader.new_repo(&work);
    write_file(&work.join("a.bin"), &random_bytes(10_000, 61));
    reader.git(&work, &["add", "."]);
    reader.git(&work, &["commit", "-q", "-m", "one"]);
    reader.git(
        &work,
        &["remote", "add", "origin", &remote(&server, "org/model")],
    );
    let err = reader.git_fails(&work, &["push", "-q", "origin", "main"]);
    assert!(err.contains("403"), "a read token cannot push: {err}");
    assert!(
        !server.data.join("repos/org/model.git").exists(),
        "nothing created by a refused push"
    );

    let wrong = GitEnv::new(Some(&server.token("org/other", "write")));
    let err = wrong.git_fails(
        &work,
        &["push", "-q", &remote(&server, "org/model"), "main"],
    );
    // Not found, as a repository that does not exist: the token does not reach it.
    assert!(
        err.contains("not found") && err.contains("no access to org/model"),
        "a token for another repository cannot push: {err}"
    );

    let writer = GitEnv::new(Some(&server.token("org/model", "write")));
    writer.git(&work, &["push", "-q", "origin", "main"]);
    assert!(server.data.join("repos/org/model.git").is_dir());
    let clone = reader.home.path().join("clone");
    reader.git(
        reader.home.path(),
        &[
            "clone",
            "-q",
            &remote(&server, "org/model"),
            clone.to_str().unwrap(),
        ],
    );
    assert_eq!(
        std::fs::read(clone.join("a.bin")).unwrap(),
        std::fs::read(work.join("a.bin")).unwrap()
    );

    let anonymous = GitEnv::new(None);
    let denied = anonymous.home.path().join("denied");
    anonymous.git_fails(
        anonymous.home.path(),
        &[
            "clone",
            "-q",
            &remote(&server, "org/model"),
            denied.to_str().unwrap(),
        ],
    );
}

#[test]
fn anonymous_read_allows_clone_but_not_push() {
    let server = TestServer::start_with(&["--anonymous-read"]);
    let writer = GitEnv::new(Some(&server.token("pub", "write")));
    let work = writer.home.path().join("work");
    writer.new_repo(&work);
    let data = random_bytes(50_000, 62);
    write_file(&work.join("x.bin"), &data);
    writer.git(&work, &["add", "."]);
    writer.git(&work, &["commit", "-q", "-m", "one"]);
    writer.git(&work, &["push", "-q", &remote(&server, "pub"), "main"]);

    let anonymous = GitEnv::new(None);
    let clone = anonymous.home.path().join("clone");
    anonymous.git(
        anonymous.home.path(),
        &[
            "clone",
            "-q",
            &remote(&server, "pub"),
            clone.to_str().unwrap(),
        ],
    );
    assert_eq!(std::fs::read(clone.join("x.bin")).unwrap(), data);
    write_file(
        &clone.join("y.bin"),
        b"more data for a push that must fail\n",
    );
    anonymous.git(&clone, &["add", "."]);
    anonymous.git(&clone, &["commit", "-q", "-m", "two"]);
    anonymous.git_fails(&clone, &["push", "-q"]);
}

/// Commits a pointer to an LFS object without uploading it (git-lfs's pre-push skipped).
fn commit_unuploaded(env: &GitEnv, work: &Path, name: &str, data: &[u8]) -> String {
    write_file(&work.join(name), data);
    env.git(work, &["add", "."]);
    env.git(work, &["commit", "-q", "-m", name]);
    sha256_hex(data)
}

/// `git push` of commits whose LFS objects were not uploaded (git-lfs's pre-push skipped),
/// so that only the server's pre-receive hook decides. The git-xet under test comes first
/// on PATH, where hooks/pre-receive looks for it (ahead of any installed one).
fn push_pointers_only(env: &GitEnv, work: &Path, target: &str) -> std::process::Command {
    let bin = git_xet_bin();
    let mut dirs = vec![bin.parent().unwrap().to_path_buf()];
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let mut cmd = env.cmd("git", work);
    cmd.args(["push", target, "main"])
        .env("GIT_LFS_SKIP_PUSH", "1")
        .env("PATH", std::env::join_paths(dirs).unwrap());
    cmd
}

#[test]
fn pre_receive_hook_rejects_pointers_to_missing_objects() {
    let server = TestServer::start();
    let env = GitEnv::new(Some(&server.token("org/model", "write")));
    let work = env.home.path().join("work");
    env.new_repo(&work);
    let oid = commit_unuploaded(&env, &work, "a.bin", &random_bytes(20_000, 63));
    env.git(
        &work,
        &["remote", "add", "origin", &remote(&server, "org/model")],
    );
    let out = push_pointers_only(&env, &work, "origin").output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("pre-receive hook declined"), "{err}");
    assert!(
        err.contains(&format!("missing LFS object {oid}")),
        "names the object: {err}"
    );
    // With the objects uploaded (git-lfs's pre-push), the same push goes through.
    env.git(&work, &["push", "-q", "origin", "main"]);
}

/// Both hooks work for any git server: here a plain bare repository pushed to over the
/// local transport, configured with git config only.
#[test]
fn pre_receive_hook_works_standalone_with_git_config() {
    for kind in [Hook::Shipped, Hook::BuiltIn] {
        standalone_hook_with_git_config(kind);
    }
}

fn standalone_hook_with_git_config(kind: Hook) {
    let server = TestServer::start();
    let token = server.token("org/model", "write");
    let env = GitEnv::new(Some(&token));
    let bare = bare_repo_with_hook(&env, &server, "org/model", kind);

    let work = env.home.path().join("work");
    env.new_repo(&work);
    let data = random_bytes(30_000, 64);
    let oid = commit_unuploaded(&env, &work, "w.bin", &data);
    let out = push_pointers_only(&env, &work, bare.to_str().unwrap())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains(&format!("missing LFS object {oid}")),
        "{kind:?}: rejected naming {oid}: {err}"
    );
    // Upload the object to the XET server's repository (git-lfs against its LFS endpoint).
    env.git(
        &work,
        &["remote", "add", "xet", &remote(&server, "org/model")],
    );
    env.git(&work, &["lfs", "push", "--object-id", "xet", &oid]);
    let out = push_pointers_only(&env, &work, bare.to_str().unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{kind:?}: accepted once uploaded: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Misconfiguration fails closed, with a clear reason.
    env.git(&bare, &["config", "--unset", "xet.serverUrl"]);
    write_file(&work.join("w.bin"), b"another version, never uploaded\n");
    env.git(&work, &["commit", "-q", "-am", "two"]);
    let out = push_pointers_only(&env, &work, bare.to_str().unwrap())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("no XET server configured"),
        "{kind:?}: {err}"
    );
}

/// The shipped hook on a git server without git-xet fails closed (the push is refused and
/// nothing is written), saying what to install.
#[test]
fn shipped_hook_without_git_xet_refuses_the_push_saying_so() {
    let server = TestServer::start();
    let env = GitEnv::new(Some(&server.token("org/model", "write")));
    let bare = bare_repo_with_hook(&env, &server, "org/model", Hook::Shipped);
    let work = env.home.path().join("work");
    env.new_repo(&work);
    commit_unuploaded(&env, &work, "a.bin", &random_bytes(5_000, 66));
    // A PATH holding git and git-lfs only (wrappers, so that they find their own files).
    let tools = env.home.path().join("tools");
    std::fs::create_dir(&tools).unwrap();
    for tool in ["git", "git-lfs"] {
        let real = std::env::split_paths(&std::env::var_os("PATH").unwrap())
            .map(|dir| dir.join(tool))
            .find(|p| p.is_file())
            .unwrap_or_else(|| panic!("{tool} is not on PATH"));
        let wrapper = tools.join(tool);
        std::fs::write(
            &wrapper,
            format!("#!/bin/sh\nexec '{}' \"$@\"\n", real.display()),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = push_pointers_only(&env, &work, bare.to_str().unwrap())
        .env("PATH", &tools)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("git-xet is not installed on this git server"),
        "{err}"
    );
    let refs = env.git(&bare, &["for-each-ref"]);
    assert_eq!(refs, "", "the refused push wrote no ref");
}

/// The two ways a git server runs the pre-receive check.
#[derive(Clone, Copy, Debug)]
enum Hook {
    /// hooks/pre-receive as shipped (git-xet from PATH).
    Shipped,
    /// `git xet pre-receive`, run from a two-line hook as the server installs it.
    BuiltIn,
}

/// A bare repository outside the server with a pre-receive hook of `kind` installed and
/// configured (git config only) to check pushes against `repo` on `server`.
fn bare_repo_with_hook(
    env: &GitEnv,
    server: &TestServer,
    repo: &str,
    kind: Hook,
) -> std::path::PathBuf {
    let bare = env.home.path().join("elsewhere.git");
    env.git(
        env.home.path(),
        &["init", "-q", "--bare", bare.to_str().unwrap()],
    );
    let installed = bare.join("hooks/pre-receive");
    match kind {
        Hook::Shipped => {
            let hook = Path::new(env!("CARGO_MANIFEST_DIR")).join("hooks/pre-receive");
            std::fs::copy(&hook, &installed).unwrap();
        }
        Hook::BuiltIn => {
            use std::os::unix::fs::PermissionsExt;
            let script = format!(
                "#!/bin/sh\nexec '{}' pre-receive\n",
                git_xet_bin().display()
            );
            std::fs::write(&installed, script).unwrap();
            std::fs::set_permissions(&installed, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    env.git(&bare, &["config", "xet.serverUrl", &server.url]);
    env.git(&bare, &["config", "xet.repo", repo]);
    env.git(&bare, &["config", "xet.token", &server.token(repo, "read")]);
    bare
}

fn pointer_text(oid: &str, size: usize) -> String {
    format!("version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {size}\n")
}

/// The hook reads all pointer candidates of a push in one pass (not a process per blob),
/// so it must find where each blob ends by its size: pointers with and without a final
/// newline are found, and binary blobs, text that only looks like a pointer, and bytes that
/// look like the batch's own headers are not mistaken for pointers. It asks the server in
/// batches, whose answers all count.
#[test]
fn pre_receive_hook_names_exactly_the_missing_pointers_among_many_blobs() {
    for kind in [Hook::Shipped, Hook::BuiltIn] {
        names_exactly_the_missing_pointers_among_many_blobs(kind);
    }
}

fn names_exactly_the_missing_pointers_among_many_blobs(kind: Hook) {
    let server = TestServer::start();
    let token = server.token("org/many", "write");
    let env = GitEnv::new(Some(&token));
    let bare = bare_repo_with_hook(&env, &server, "org/many", kind);
    let work = env.home.path().join("work");
    env.new_repo(&work);
    env.git(
        &work,
        &["remote", "add", "xet", &remote(&server, "org/many")],
    );

    // One object the server holds: committed through LFS and uploaded.
    let held = commit_unuploaded(&env, &work, "held.bin", &random_bytes(5_000, 65));
    env.git(&work, &["lfs", "push", "--object-id", "xet", &held]);

    // Pointer texts committed as plain files (`.txt` is not tracked by LFS): the hook
    // reads blobs, whatever wrote them.
    let mut missing = Vec::new();
    for i in 0..40 {
        let oid = sha256_hex(format!("never uploaded {i}").as_bytes());
        write_file(
            &work.join(format!("p{i}.txt")),
            pointer_text(&oid, 1000 + i).as_bytes(),
        );
        missing.push(oid);
    }
    let no_eol = sha256_hex(b"no final newline");
    let text = pointer_text(&no_eol, 77);
    write_file(&work.join("noeol.txt"), text.trim_end().as_bytes());
    // The same pointer in another blob (with its newline): asked about and named once.
    write_file(&work.join("same.txt"), text.as_bytes());
    missing.push(no_eol);
    // A binary candidate with NULs, holding a line shaped like a batch header followed by a
    // pointer: a parser that lost its place would report this oid.
    let decoy = sha256_hex(b"decoy");
    let mut binary = vec![0u8; 40];
    binary.extend_from_slice(format!("\n{decoy} blob 130\n").as_bytes());
    binary.extend_from_slice(pointer_text(&decoy, 5).as_bytes());
    binary.extend_from_slice(&[0, 1, 2, 0, b'\n', 0]);
    write_file(&work.join("decoy.dat"), &binary);
    // Text of pointer size whose first line is not the version line.
    let not_first = sha256_hex(b"not first");
    write_file(
        &work.join("notes.txt"),
        format!("notes\n{}", pointer_text(&not_first, 9)).as_bytes(),
    );
    env.git(&work, &["add", "."]);
    env.git(&work, &["commit", "-q", "-m", "many"]);

    // Seven pointers per request: the answers of several requests are put together.
    let out = push_pointers_only(&env, &work, bare.to_str().unwrap())
        .env("GIT_XET_HOOK_BATCH_LINES", "7")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{kind:?}: rejected: {err}");
    assert!(
        err.contains(&format!("rejected: {} LFS object(s)", missing.len())),
        "{kind:?}: counts {} missing: {err}",
        missing.len()
    );
    for oid in &missing {
        assert!(
            err.contains(&format!("missing LFS object {oid}")),
            "{kind:?}: names {oid}: {err}"
        );
    }
    for oid in [&held, &decoy, &not_first] {
        assert!(
            !err.contains(oid.as_str()),
            "{kind:?}: does not name {oid}: {err}"
        );
    }
}

/// The ref advertisement as git's smart HTTP protocol has it: v0 starts with the service
/// banner, v2 (asked for with `Git-Protocol`) with its capability list; never cacheable.
#[test]
fn advertisements_follow_the_smart_http_protocol() {
    let server = TestServer::start();
    let env = GitEnv::new(Some(&server.token("org/adv", "write")));
    let work = env.home.path().join("work");
    env.new_repo(&work);
    write_file(&work.join("README.md"), b"hello\n");
    env.git(&work, &["add", "."]);
    env.git(&work, &["commit", "-q", "-m", "one"]);
    env.git(&work, &["push", "-q", &remote(&server, "org/adv"), "main"]);
    let head = env.git(&work, &["rev-parse", "HEAD"]);

    let http = crate::common::client();
    let url = format!("{}/info/refs", remote(&server, "org/adv"));
    let token = server.token("org/adv", "write");
    for (service, protocol) in [
        ("git-upload-pack", None),
        ("git-upload-pack", Some("version=2")),
        ("git-receive-pack", None),
    ] {
        let mut req = http
            .get(&url)
            .query(&[("service", service)])
            .basic_auth("x", Some(&token));
        if let Some(p) = protocol {
            req = req.header("Git-Protocol", p);
        }
        let resp = req.send().unwrap();
        assert_eq!(resp.status(), 200, "{service} {protocol:?}");
        let h = resp.headers();
        assert_eq!(
            h["content-type"],
            format!("application/x-{service}-advertisement").as_str()
        );
        assert!(h["cache-control"].to_str().unwrap().contains("no-cache"));
        let body = resp.text().unwrap();
        match protocol {
            None => {
                let banner = format!("# service={service}\n");
                let expected = format!("{:04x}{banner}0000", banner.len() + 4);
                assert!(body.starts_with(&expected), "{service}: {body:?}");
                assert!(body.contains(head.trim()), "refs are advertised: {body:?}");
            }
            Some(_) => assert!(body.starts_with("000eversion 2\n"), "{body:?}"),
        }
    }
    let resp = http
        .get(&url)
        .query(&[("service", "git-upload-archive")])
        .basic_auth("x", Some(&token))
        .send()
        .unwrap();
    assert_eq!(resp.status(), 403, "other services are not served");
}

/// A fetch of many new branches sends enough `want` lines that git gzips the request
/// body; the server inflates it, with protocol v0 and v2 alike.
#[test]
fn gzipped_fetch_requests_are_understood() {
    let server = TestServer::start();
    let env = GitEnv::new(Some(&server.token("org/hist", "write")));
    let work = env.home.path().join("work");
    env.new_repo(&work);
    let url = remote(&server, "org/hist");
    env.git(&work, &["remote", "add", "origin", &url]);
    write_file(&work.join("log.txt"), b"start\n");
    env.git(&work, &["add", "."]);
    env.git(&work, &["commit", "-q", "-m", "start"]);
    env.git(&work, &["push", "-q", "origin", "main"]);
    for version in ["0", "2"] {
        let clone = env.home.path().join(format!("clone-v{version}"));
        env.git(
            env.home.path(),
            &["clone", "-q", &url, clone.to_str().unwrap()],
        );
        // 40 new branches, each with its own commit: 40 `want` lines of 50 bytes.
        for i in 0..40 {
            let branch = format!("v{version}-b{i}");
            env.git(&work, &["checkout", "-q", "-b", &branch, "main"]);
            write_file(&work.join("log.txt"), branch.as_bytes());
            env.git(&work, &["commit", "-q", "-am", &branch]);
        }
        env.git(&work, &["checkout", "-q", "main"]);
        env.git(&work, &["push", "-q", "origin", "--all"]);

        let out = env
            .cmd("git", &clone)
            .env("GIT_TRACE_CURL", "1")
            .env("GIT_TRACE_CURL_NO_DATA", "1")
            .args([
                "-c",
                &format!("protocol.version={version}"),
                "fetch",
                "-q",
                "origin",
            ])
            .output()
            .unwrap();
        let trace = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "fetch v{version}: {trace}");
        assert!(
            trace.contains("Content-Encoding: gzip"),
            "v{version}: the request was not gzipped, so this test tests nothing: {trace}"
        );
        let last = format!("origin/v{version}-b39");
        assert_eq!(
            env.git(&clone, &["rev-parse", &last]),
            env.git(&work, &["rev-parse", &last[7..]]),
            "v{version}"
        );
    }
}

/// A first push of `master` into a repository the server created with `main`: HEAD is
/// pointed at the branch that exists, so a clone checks it out.
#[test]
fn a_first_push_of_another_branch_becomes_head() {
    let server = TestServer::start();
    let env = GitEnv::new(Some(&server.token("org/legacy", "write")));
    let work = env.home.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    env.git(&work, &["init", "-q", "-b", "master"]);
    write_file(&work.join("README.md"), b"legacy\n");
    env.git(&work, &["add", "."]);
    env.git(&work, &["commit", "-q", "-m", "one"]);
    let url = remote(&server, "org/legacy");
    env.git(&work, &["push", "-q", &url, "master"]);
    let bare = server.data.join("repos/org/legacy.git");
    assert_eq!(
        std::fs::read_to_string(bare.join("HEAD")).unwrap(),
        "ref: refs/heads/master\n"
    );
    let clone = env.home.path().join("clone");
    env.git(
        env.home.path(),
        &["clone", "-q", &url, clone.to_str().unwrap()],
    );
    assert_eq!(std::fs::read(clone.join("README.md")).unwrap(), b"legacy\n");
    // A later push of `main` leaves HEAD where it is.
    env.git(&work, &["push", "-q", &url, "master:main"]);
    assert_eq!(
        std::fs::read_to_string(bare.join("HEAD")).unwrap(),
        "ref: refs/heads/master\n"
    );
}
