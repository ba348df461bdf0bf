//! `git xet status` and `git xet quickstart`.

use crate::env::{ok, remote_url, stderr, stdout, GitEnv};
use crate::support::{random_bytes, write_file, TestServer};

#[test]
fn status_reports_the_agent_the_endpoint_and_xet_hashes() {
    let server = TestServer::start();
    let remote = remote_url(&server, "org/status", "write");
    let env = GitEnv::with_agent(&[]);
    let a = env.lfs_repo("a", &remote);
    write_file(&a.join("m.bin"), &random_bytes(300_000, 61));
    env.commit_all_and_push(&a, "m");

    let out = stdout(&ok(env.xet_output(&a, &["status"]), "status"));
    assert!(
        out.contains("agent:          configured (global config)"),
        "{out}"
    );
    assert!(
        out.contains(&format!("{}/org/status.git/info/lfs", server.addr())),
        "{out}"
    );
    assert!(
        !out.contains(&server.token("org/status", "write")),
        "no token in the output"
    );
    assert!(out.contains("offers xet:     yes"), "{out}");
    let hash = env.xet(&a, &["hash", "m.bin"]);
    let hash = hash.split_whitespace().next().unwrap();
    assert!(
        out.contains(&format!("{hash}  ")),
        "the XET hash of m.bin ({hash}) is listed:\n{out}"
    );
    assert!(
        !out.contains("shard cache:    0 B"),
        "the push filled the shard cache:\n{out}"
    );

    // Against a plain LFS server, status says xet is not offered.
    let plain = TestServer::start_with(&["--basic-only"]);
    env.git(
        &a,
        &[
            "remote",
            "add",
            "plain",
            &remote_url(&plain, "org/status", "write"),
        ],
    );
    let out = stdout(&ok(
        env.xet_output(&a, &["status", "--remote", "plain"]),
        "status plain",
    ));
    assert!(out.contains("offers xet:     no"), "{out}");
}

#[test]
fn quickstart_runs_the_whole_workflow() {
    let env = GitEnv::new();
    let out = env.xet_output(&env.dir("."), &["quickstart", "--size-mib", "16"]);
    let (o, e) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{o}\n{e}");
    assert!(o.contains("bit-exact"), "{o}");
    assert!(o.contains("dedup ratio:"), "{o}");
    assert!(o.contains("version 2 (4 KiB edit)"), "{o}");
    // Its downloads are another machine's (an empty chunk store): the whole first version;
    // a clone on this machine takes every chunk from the store the push filled, and says so.
    let v1 = o
        .lines()
        .find(|l| l.contains("version 1 (new file)"))
        .unwrap();
    assert_eq!(v1.matches("16.0 MiB").count(), 2, "{o}");
    assert!(o.contains("A clone on this machine downloaded 0 B"), "{o}");
}
