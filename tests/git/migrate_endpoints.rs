//! `git xet migrate` wherever the old LFS server is named: a committed `.lfsconfig`, or
//! `lfs.url` in git config (which git-lfs applies to every remote, so that migrate must not
//! take it for the destination); an old server that needs credentials from git's credential
//! helpers; `--update-lfsconfig`. (`remote.origin.lfsurl`: migrate.rs.)

use crate::env::{ok, remote_url, stderr, stdout, GitEnv};
use crate::old_lfs::{build_fixture, clone_and_compare, OldLfs};
use crate::support::TestServer;

/// `http://host/path` of a URL that may carry `user:token@`.
fn bare(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let rest = rest.split_once('@').map(|(_, r)| r).unwrap_or(rest);
            format!("{scheme}://{rest}")
        }
        None => url.to_string(),
    }
}

/// The first line of migrate's stderr names the source and the destination.
pub fn assert_first_line_names(out: &std::process::Output, source: &str, destination: &str) {
    let err = stderr(out);
    let first = err.lines().next().unwrap_or("");
    assert!(
        first.contains(&format!("from {}", bare(source)))
            && first.contains(&format!("to {} (xet's endpoint)", bare(destination))),
        "first line: {first}\n{err}"
    );
    assert!(
        !first.contains('@'),
        "no credentials in the first line: {first}"
    );
}

/// A clone of the fixture's bare remote with `xet` added and the other branches local.
fn clone_old(
    env: &GitEnv,
    fixture: &std::path::Path,
    config: &[String],
    xet: &str,
) -> std::path::PathBuf {
    let work = env.dir("work");
    let mut args = vec!["clone".to_string(), "-q".to_string()];
    for c in config {
        args.extend(["-c".to_string(), c.clone()]);
    }
    args.push(fixture.join("remote.git").to_string_lossy().into_owned());
    args.push(work.to_string_lossy().into_owned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    env.git(&env.dir("."), &args);
    env.git(&work, &["remote", "add", "xet", xet]);
    for branch in ["feature", "release"] {
        env.git(
            &work,
            &["branch", "-q", branch, &format!("origin/{branch}")],
        );
    }
    work
}

#[test]
fn migrate_from_a_server_named_by_a_committed_lfsconfig_and_update_it() {
    let old = OldLfs::start();
    let server = TestServer::start();
    let env = GitEnv::with_agent(&[]);
    let fixture = build_fixture(&env, &old.endpoint());
    // The old server named the way most hosted repositories do: a committed .lfsconfig.
    let source = fixture.join("work");
    env.git(&source, &["checkout", "-q", "main"]);
    env.git(
        &source,
        &["config", "-f", ".lfsconfig", "lfs.url", &old.endpoint()],
    );
    env.git(&source, &["add", ".lfsconfig"]);
    env.git(
        &source,
        &["commit", "-qm", "lfs: objects on the team server"],
    );
    env.git(&source, &["push", "-q", "--no-verify", "origin", "main"]);

    let xet = remote_url(&server, "org/cfg", "write");
    let work = clone_old(&env, &fixture, &[], &xet);
    let out = ok(
        env.xet_output(&work, &["migrate", "xet", "--update-lfsconfig"]),
        "migrate",
    );
    let destination = format!("{}/info/lfs", xet);
    assert_first_line_names(&out, &old.endpoint(), &destination);
    let report = stdout(&out);
    assert!(
        report.contains("files:          7 (7 uploaded now"),
        "{report}"
    );
    assert!(
        stderr(&out).contains("verified: all 7 objects"),
        "{}",
        stderr(&out)
    );
    // xet's URL derives its endpoint: the new commit removes lfs.url, and with it the file.
    assert!(!work.join(".lfsconfig").exists(), "{report}");
    let subject = env.git(&work, &["log", "-1", "--format=%s"]);
    assert!(subject.contains("git xet migrate"), "{subject}");
    let changed = env.git(&work, &["show", "--name-status", "--format=", "HEAD"]);
    assert_eq!(changed.trim(), "D\t.lfsconfig", "only .lfsconfig changes");
    assert!(
        report.contains("git push xet --all && git push xet --tags")
            && report.contains("changes .lfsconfig")
            && report.contains(&format!("git config lfs.url {}", bare(&destination))),
        "{report}"
    );
    assert!(!report.contains(&server.token("org/cfg", "write")[..20]));

    env.git(&work, &["push", "-q", "xet", "--all"]);
    env.git(&work, &["push", "-q", "xet", "--tags"]);
    // The old server is gone; every ref still checks out, from XET alone.
    drop(old);
    clone_and_compare(&xet, &fixture, &env, &[]);
}

#[test]
fn migrate_from_lfs_url_in_git_config_to_an_old_server_needing_credentials() {
    let old = OldLfs::start_with_auth();
    let server = TestServer::start();
    let env = GitEnv::with_agent(&[]);
    // git-lfs (fixture build, clone, `git lfs fetch`) asks git's credential helpers.
    env.git(
        &env.dir("."),
        &[
            "config",
            "--global",
            "credential.helper",
            &old.credential_helper(),
        ],
    );
    let fixture = build_fixture(&env, &old.bare_endpoint());
    let xet = remote_url(&server, "org/cfg2", "write");
    let work = clone_old(
        &env,
        &fixture,
        &[format!("lfs.url={}", old.bare_endpoint())],
        &xet,
    );
    // Only main's objects are local: the rest come from the old server, with credentials.
    let out = ok(
        env.xet_output(&work, &["migrate", "xet", "--jobs", "3"]),
        "migrate",
    );
    let destination = format!("{}/info/lfs", xet);
    assert_first_line_names(&out, &old.bare_endpoint(), &destination);
    let report = stdout(&out);
    assert!(
        report.contains("files:          7 (7 uploaded now"),
        "{report}"
    );
    assert!(
        report.contains("lfs.url in your git config") && !report.contains(".lfsconfig names"),
        "{report}"
    );
    assert_eq!(
        env.git(&work, &["config", "lfs.url"]).trim(),
        old.bare_endpoint(),
        "migrate changes no configuration unless asked"
    );

    // `--to` names the destination explicitly; the objects are all there already.
    let out = ok(
        env.xet_output(
            &work,
            &["migrate", "xet", "--to", &destination, "--skip-verify"],
        ),
        "migrate --to",
    );
    assert!(
        stdout(&out).contains("0 uploaded now, 7 already on the server"),
        "{}",
        stdout(&out)
    );

    env.git(&work, &["push", "-q", "xet", "--all"]);
    env.git(&work, &["push", "-q", "xet", "--tags"]);
    drop(old);
    clone_and_compare(&xet, &fixture, &env, &[]);
}
