//! `git xet migrate` of the fixture repository, served by a plain LFS server that is not
//! ours (giftless), named by `remote.origin.lfsurl`; interrupted by kill -9 and resumed.
//! The other endpoint configurations are in migrate_endpoints.rs.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use crate::env::{ok, remote_url, stderr, stdout, GitEnv};
use crate::old_lfs::{build_fixture, clone_and_compare, OldLfs};
use crate::support::TestServer;

#[test]
fn migrate_moves_every_object_and_a_xet_only_clone_checks_out_all_refs() {
    let old = OldLfs::start();
    let server = TestServer::start();
    let env = GitEnv::with_agent(&[]);
    let fixture = build_fixture(&env, &old.endpoint());
    let xet_remote = remote_url(&server, "org/migrated", "write");

    // A clone of the old repository (it has only main's objects locally).
    let work = env.dir("work");
    let lfsurl = format!("remote.origin.lfsurl={}", old.endpoint());
    env.git(
        &env.dir("."),
        &[
            "clone",
            "-q",
            "-c",
            &lfsurl,
            fixture.join("remote.git").to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    env.git(&work, &["remote", "add", "xet", &xet_remote]);
    for branch in ["feature", "release"] {
        env.git(
            &work,
            &["branch", "-q", branch, &format!("origin/{branch}")],
        );
    }

    // Interrupt a first run after its first upload...
    let mut first = env
        .command(crate::support::git_xet_bin(), &work)
        .args(["migrate", "xet", "--jobs", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(first.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let done = line.contains("uploaded");
        seen.push(line);
        if done {
            break;
        }
    }
    let _ = first.kill(); // SIGKILL: nothing gets to clean up
    let _ = first.wait();
    assert!(
        seen.iter().any(|l| l.contains("uploaded")),
        "first run output:\n{}",
        seen.join("\n")
    );

    // ...and the re-run continues without sending it again.
    let out = ok(env.xet_output(&work, &["migrate", "xet"]), "migrate");
    let report = stdout(&out);
    assert!(
        report.contains("files:          7 ("),
        "{report}\n{}",
        stderr(&out)
    );
    let already = number_after(&report, "uploaded now, ");
    let uploaded = number_after(&report, "7 (");
    assert!(
        already >= 1,
        "the interrupted run's upload counts as done:\n{report}"
    );
    assert_eq!(uploaded + already, 7, "{report}");
    assert!(report.contains("dedup ratio:"), "{report}");
    assert!(
        stderr(&out).contains("verified: all 7 objects"),
        "{}",
        stderr(&out)
    );

    // Nothing left to send on a third run, here on a terminal (script(1) records what it
    // showed): a bar with objects and bytes instead of a line per object.
    let received = server.metric("git_xet_xorb_bytes_received_total");
    let typescript = env.dir(".").join("typescript");
    let git_xet = crate::support::git_xet_bin();
    let run = format!("'{}' migrate xet --skip-verify", git_xet.display());
    let out = env
        .command("script", &work)
        .args(["-qec", &run, typescript.to_str().unwrap()])
        .output()
        .expect("run script(1) from util-linux");
    ok(out, "migrate again, on a terminal");
    let shown = String::from_utf8_lossy(&std::fs::read(&typescript).unwrap()).into_owned();
    assert!(
        shown.contains("0 uploaded now, 7 already on the server"),
        "{shown}"
    );
    assert!(
        shown.contains("7/7 objects") && shown.contains("14.56 MiB/14.56 MiB"),
        "no bar with objects and bytes:\n{shown}"
    );
    assert!(
        !shown.contains("[7/7]"),
        "per-object lines on a terminal:\n{shown}"
    );
    assert_eq!(server.metric("git_xet_xorb_bytes_received_total"), received);

    // The git history moves with a plain push; the LFS objects are already there.
    env.git(&work, &["push", "-q", "xet", "main", "feature", "release"]);
    env.git(&work, &["push", "-q", "xet", "--tags"]);

    // Without the old server, a clone with only XET configured checks out every ref
    // bit-exact.
    drop(old);
    let basic_before = server.metric("git_xet_lfs_basic_bytes_served_total");
    clone_and_compare(&xet_remote, &fixture, &env, &[]);
    assert_eq!(
        server.metric("git_xet_lfs_basic_bytes_served_total"),
        basic_before,
        "only XET was used"
    );
}

fn number_after(text: &str, marker: &str) -> u64 {
    let rest = &text[text
        .find(marker)
        .unwrap_or_else(|| panic!("{marker:?} in {text}"))
        + marker.len()..];
    rest.chars()
        .take_while(|c| c.is_ascii_digit())
        .collect::<String>()
        .parse()
        .unwrap()
}

#[test]
fn migrate_explains_a_server_without_xet() {
    let old = OldLfs::Ours(TestServer::start_with(&["--basic-only"]));
    let env = GitEnv::with_agent(&[]);
    let fixture = build_fixture(&env, &old.endpoint());
    let work = fixture.join("work");
    let OldLfs::Ours(server) = &old else {
        unreachable!()
    };
    env.git(
        &work,
        &[
            "remote",
            "add",
            "plain",
            &remote_url(server, "org/fixture", "write"),
        ],
    );
    let out = env.xet_output(&work, &["migrate", "plain"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("does not offer the `xet` transfer"),
        "{}",
        stderr(&out)
    );
    // The remote URL carries a token: no message shows it.
    let url = env.git(&work, &["remote", "get-url", "plain"]);
    let token = url.split_once("x:").unwrap().1.split('@').next().unwrap();
    assert!(!stderr(&out).contains(token), "{}", stderr(&out));
}
