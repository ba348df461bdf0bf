//! `git xet server import-lfs`: a giftless object store imported server-side (no client
//! involved), the repository's history pushed with `git push --mirror`, and a clone through
//! XET bit-exact on every ref; a re-run skips everything; git-lfs's own `aa/bb/<oid>` layout
//! imported into a second repository only grants what is stored; an object whose bytes do
//! not match its name is refused and nothing of it stored.

use std::path::Path;

use crate::env::{ok, remote_url, stderr, stdout, GitEnv};
use crate::old_lfs::{build_fixture, clone_and_compare, OldLfs};
use crate::support::{git_xet, TestServer};

fn import(server: &TestServer, repo: &str, from: &Path) -> std::process::Output {
    let mut cmd = git_xet();
    cmd.args(["server", "import-lfs", "--repo", repo, "--from"])
        .arg(from)
        .arg("--data")
        .arg(&server.data);
    // The server's own store when GIT_XET_TEST_OBJECT_STORE=garage put it on S3.
    if let Some(url) = server.s3_store_url() {
        cmd.arg("--object-store").arg(url);
        if let Some(garage) = crate::support::garage::shared() {
            garage.apply_env(&mut cmd);
        }
    }
    cmd.output().unwrap()
}

fn number_after(text: &str, marker: &str) -> f64 {
    let at = text
        .find(marker)
        .unwrap_or_else(|| panic!("{marker:?} in {text}"));
    text[at + marker.len()..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect::<String>()
        .parse()
        .unwrap()
}

#[test]
fn a_giftless_store_imports_server_side_and_clones_bit_exact() {
    let old = OldLfs::start();
    let env = GitEnv::with_agent(&[]);
    let fixture = build_fixture(&env, &old.endpoint());
    // giftless keeps <store>/<org>/<repo>/<oid>; our stand-in has no store, so git-lfs's
    // own (aa/bb/<oid>) from the fixture's work tree takes its place.
    let git_lfs_store = fixture.join("work/.git/lfs/objects");
    let store = old.object_dir().unwrap_or_else(|| git_lfs_store.clone());
    let server = TestServer::start();

    // Imported while the server runs.
    let out = ok(import(&server, "org/imported", &store), "import-lfs");
    let report = stdout(&out);
    assert!(
        report.contains("objects:        7 (7 converted now, 0 already in"),
        "{report}\n{}",
        stderr(&out)
    );
    let logical = number_after(&report, "logical bytes:");
    let stored = number_after(&report, "bytes stored:");
    assert_eq!(
        logical,
        3145728.0 + 1048576.0 + 1000.0 + 3145728.0 + 2621440.0 + 2097152.0 + 3211264.0
    );
    // Edited, appended and prefix-sharing versions are stored once.
    assert!(stored < logical * 0.7, "{report}");
    assert!(number_after(&report, "dedup ratio:") > 1.4, "{report}");

    // The history, mirrored.
    let url = remote_url(&server, "org/imported", "write");
    let mirror = env.dir("mirror.git");
    env.git(
        &env.dir("."),
        &[
            "clone",
            "-q",
            "--mirror",
            fixture.join("remote.git").to_str().unwrap(),
            mirror.to_str().unwrap(),
        ],
    );
    env.git(&mirror, &["push", "-q", "--mirror", &url]);

    // A re-run has nothing to do.
    let out = ok(import(&server, "org/imported", &store), "import-lfs again");
    assert!(
        stdout(&out).contains("(0 converted now, 7 already in"),
        "{}",
        stdout(&out)
    );
    // git-lfs's layout into another repository: converted again (no repository's file is
    // found by another's sha256 claim), but its chunks deduplicate: little is stored (runs
    // too short to reference are stored again against fragmentation; how many there are
    // depends on how the first import's parallel objects interleaved: 1% to a few %).
    let out = ok(
        import(&server, "org/second", &git_lfs_store),
        "import-lfs aa/bb",
    );
    let report = stdout(&out);
    assert!(
        report.contains("(7 converted now, 0 already in"),
        "{report}"
    );
    assert!(
        number_after(&report, "bytes stored:") < logical * 0.25,
        "{report}"
    );

    // Without the old server, every ref checks out bit-exact from ours.
    drop(old);
    clone_and_compare(&url, &fixture, &env, &[]);
}

#[test]
fn an_object_that_does_not_match_its_name_is_refused() {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let good = b"the bytes of a good object\n".repeat(1000);
    let good_oid = sha256_hex(&good);
    let bad_oid = "ab".repeat(32);
    for (oid, bytes) in [
        (&good_oid, &good[..]),
        (&bad_oid, &b"not what the name says"[..]),
    ] {
        let path = dir.path().join(&oid[0..2]).join(&oid[2..4]).join(oid);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    std::fs::write(dir.path().join("README"), "not an object").unwrap();
    let out = import(&server, "org/bad", dir.path());
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(&format!("{bad_oid} holds bytes hashing to"))
            && err.contains("1 objects do not match their names"),
        "{err}"
    );
    assert!(err.contains("1 files not named by a sha256"), "{err}");
    assert!(
        stdout(&out).contains("objects:        2 (1 converted now"),
        "{}",
        stdout(&out)
    );
    // The good one is downloadable from the repository, the bad one is not there.
    let token = server.token("org/bad", "read");
    for (oid, status) in [(&good_oid, "200"), (&bad_oid, "404")] {
        let code = std::process::Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-u"])
            .arg(format!("x:{token}"))
            .arg(format!(
                "http://{}/org/bad.git/info/lfs/objects/{oid}",
                server.addr()
            ))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&code.stdout), status, "{oid}");
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
