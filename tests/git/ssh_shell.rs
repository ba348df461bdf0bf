//! `git xet shell` behind a real OpenSSH sshd on loopback, installed the way an admin does
//! it (`git xet server user add --authorized-keys`): clone and push over ssh, LFS through
//! `git-lfs-authenticate` and through `git-lfs-transfer`, with plain git-lfs and with
//! git-xet installed, and refusals for keys without access.

use std::process::{Command, Output};

use crate::env::{self, assert_same_file, stderr, GitEnv};
use crate::sshd::{self, Sshd};
use crate::support::{git_xet, TestServer};

/// The server, sshd, and the users whose keys are in its authorized_keys.
pub(crate) struct Site {
    pub(crate) server: TestServer,
    pub(crate) sshd: Sshd,
}

/// `users`: each name with its `--repo` grants (and other `user add` options).
pub(crate) fn site(users: &[(&str, &[&str])]) -> Option<Site> {
    if !sshd::available() {
        return None;
    }
    let server = TestServer::start();
    let names: Vec<&str> = users.iter().map(|(n, _)| *n).collect();
    let sshd = Sshd::start_empty(&names);
    for (name, repos) in users {
        let mut cmd = sshd.user_add(&server, name);
        for arg in *repos {
            match arg.starts_with("--") {
                true => cmd.arg(arg),
                false => cmd.args(["--repo", arg]),
            };
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "user add: {}", stderr(&out));
    }
    Some(Site { server, sshd })
}

impl Site {
    /// A git environment (`plain`: git-lfs only; else git-xet installed) whose ssh logs in
    /// with `user`'s key.
    pub(crate) fn env(&self, user: &str, plain: bool) -> GitEnv {
        let env = if plain {
            GitEnv::plain_lfs()
        } else {
            GitEnv::with_agent(&[])
        };
        env.with_env("GIT_SSH_COMMAND", &self.sshd.ssh_command_as(user))
    }

    /// Runs `command` as the ssh client's command, logged in with `user`'s key.
    pub(crate) fn ssh(&self, user: &str, command: Option<&str>) -> Output {
        let ssh = self.sshd.ssh_command_as(user);
        let mut words = ssh.split_whitespace();
        let mut cmd = Command::new(words.next().unwrap());
        cmd.args(words)
            .args(["-p", &self.sshd.port.to_string()])
            .arg(format!("{}@127.0.0.1", self.sshd.user))
            .args(command)
            .stdin(std::process::Stdio::null());
        cmd.output().unwrap()
    }
}

fn failed_saying(out: Output, what: &str, expected: &str) -> String {
    let said = stderr(&out);
    assert!(!out.status.success(), "{what} should fail:\n{said}");
    assert!(
        said.contains(expected),
        "{what}: expected {expected:?} in:\n{said}"
    );
    said
}

/// Bytes that do not compress or dedup into nothing, several pkt-lines long.
pub(crate) fn payload(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn git_over_ssh_serves_granted_repositories_only() {
    let Some(site) = site(&[
        ("alice", &["org/m:write"]),
        ("carol", &["org/m:read"]),
        ("bob", &["org/other:write"]),
    ]) else {
        return;
    };
    let url = site.sshd.url("org/m");
    let alice = site.env("alice", true);
    let a = alice.init_repo("a");
    alice.git(&a, &["remote", "add", "origin", &url]);
    alice.git(&a, &["push", "-q", "origin", "main"]);
    let bare = site.server.data.join("repos/org/m.git");
    assert!(
        bare.join("hooks/pre-receive").is_file(),
        "created with the hook"
    );
    let reflog = std::fs::read_to_string(bare.join("logs/refs/heads/main")).unwrap_or_default();
    assert!(reflog.is_empty() || reflog.contains("alice"), "{reflog}");

    // A reader clones; it may not push.
    let carol = site.env("carol", true);
    let c = carol.dir("c");
    carol.git(&c, &["clone", "-q", &url, "."]);
    assert_eq!(
        std::fs::read_to_string(c.join("README")).unwrap(),
        "hello\n"
    );
    std::fs::write(c.join("more"), "x").unwrap();
    carol.git(&c, &["add", "more"]);
    carol.git(&c, &["commit", "-qm", "more"]);
    let out = carol.git_output(&c, &["push", "-q", "origin", "main"]);
    failed_saying(
        out,
        "a reader's push",
        "carol has read access to repository org/m; write access is needed",
    );

    // A key for another repository sees nothing of this one, for git and for LFS.
    let bob = site.env("bob", true);
    let out = bob.git_output(&c, &["ls-remote", &url]);
    failed_saying(
        out,
        "bob's ls-remote",
        "bob has no access to repository org/m",
    );
    for lfs in [
        "git-lfs-authenticate org/m.git download",
        "git-lfs-transfer org/m.git upload",
    ] {
        let out = site.ssh("bob", Some(lfs));
        assert!(out.stdout.is_empty(), "nothing on stdout for a refusal");
        failed_saying(out, lfs, "bob has no access to repository org/m");
    }

    // The pre-receive check of HTTP pushes runs on ssh pushes: a pointer to an object the
    // server does not hold is refused.
    let plain = GitEnv::new().with_env("GIT_SSH_COMMAND", &site.sshd.ssh_command_as("alice"));
    let p = plain.dir("p");
    plain.git(&p, &["clone", "-q", &url, "."]);
    let oid = "1".repeat(64);
    std::fs::write(
        p.join("x.bin"),
        format!("version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize 5\n"),
    )
    .unwrap();
    plain.git(&p, &["add", "x.bin"]);
    plain.git(&p, &["commit", "-qm", "dangling pointer"]);
    let out = plain.git_output(&p, &["push", "-q", "origin", "main"]);
    failed_saying(
        out,
        "a push of a dangling pointer",
        &format!("missing LFS object {oid}"),
    );
}

#[test]
fn hostile_and_unknown_commands_are_refused_and_run_nothing() {
    let Some(site) = site(&[("alice", &["org/m:write", "team/*"])]) else {
        return;
    };
    let marker = site.server.data.join("pwned");
    let m = marker.display();
    for (command, expected) in [
        (None, "no interactive shell"),
        (Some(format!("touch {m}")), "only git-upload-pack"),
        (Some(format!("sh -c 'touch {m}'")), "unsupported character"),
        (
            Some(format!("git-upload-pack '--upload-pack=touch {m}'")),
            "unsupported character",
        ),
        (
            Some("git-upload-pack '--upload-pack=id'".into()),
            "invalid repository name",
        ),
        (
            Some("git-upload-pack org/m;touch".into()),
            "invalid repository name",
        ),
        (
            Some(format!("git-upload-pack 'org/m';touch {m}")),
            "unsupported character",
        ),
        (
            Some(format!("git-upload-pack \"$(touch {m})\"")),
            "unsupported character",
        ),
        (
            Some("git-upload-pack '/org/../../etc'".into()),
            "invalid repository name",
        ),
        (
            Some("git-receive-pack '../x.git'".into()),
            "invalid repository name",
        ),
        (
            Some("git-upload-archive 'org/m.git'".into()),
            "only git-upload-pack",
        ),
        (
            Some("git-lfs-authenticate org/m.git delete".into()),
            "upload or download",
        ),
        (
            Some("git-upload-pack 'org/nothing.git'".into()),
            "no access to repository org/nothing",
        ),
        (
            Some("git-upload-pack 'team/none.git'".into()),
            "repository team/none does not exist",
        ),
        (
            Some("git-lfs-authenticate team/x upload".into()),
            "read access to repository team/x; write",
        ),
    ] {
        let out = site.ssh("alice", command.as_deref());
        failed_saying(out, &format!("{command:?}"), expected);
    }
    assert!(!marker.exists(), "a refused command ran");
    assert!(
        !site.server.data.join("repos/org/m.git").exists(),
        "nothing was created"
    );
}

/// How git-lfs reaches the LFS objects: `git-lfs-authenticate` then HTTP, or the pure ssh
/// protocol (`git-lfs-transfer`), negotiated (git-lfs's default) or forced.
#[derive(Clone, Copy, Debug)]
enum Route {
    Authenticate,
    TransferNegotiated,
    TransferAlways,
}

fn lfs_round_trip(plain: bool, route: Route) {
    // git-lfs 3.3 (Debian 12's) always tries git-lfs-transfer first and has no setting to
    // skip it: the authenticate route is forced on the server side, per key.
    let off: &[&str] = match route {
        Route::Authenticate => &["--no-lfs-transfer"],
        _ => &[],
    };
    let alice_args = [&["org/lfs:write"], off].concat();
    let carol_args = [&["org/lfs:read"], off].concat();
    let Some(site) = site(&[("alice", &alice_args), ("carol", &carol_args)]) else {
        return;
    };
    let url = site.sshd.url("org/lfs");
    let sshtransfer = match route {
        Route::Authenticate => "never",
        Route::TransferNegotiated => "negotiate",
        Route::TransferAlways => "always",
    };
    let alice = site.env("alice", plain).with_env("GIT_TRACE", "1");
    alice.git(
        &alice.dir("install"),
        &["config", "--global", "lfs.sshtransfer", sshtransfer],
    );
    let a = alice.lfs_repo("a", &url);
    let big = payload(7, 3 << 20);
    std::fs::write(a.join("big.bin"), &big).unwrap();
    std::fs::write(a.join("small.bin"), b"small\n").unwrap();
    alice.git(&a, &["add", "."]);
    alice.git(&a, &["commit", "-qm", "lfs files"]);
    let basic_in = site.server.metric("git_xet_lfs_basic_bytes_received_total");
    let xorb_in = site.server.metric("git_xet_xorb_bytes_received_total");
    let out = env::ok(alice.git_output(&a, &["push", "origin", "main"]), "push");
    let trace = stderr(&out);
    // (git-lfs 3.3 traces no "connection successful"; the adapter it starts tells.)
    let pure_ssh = trace.contains("starting transfer adapter \"ssh\"");
    match route {
        Route::Authenticate => assert!(
            !pure_ssh && trace.contains("git-lfs-authenticate"),
            "{trace}"
        ),
        _ => assert!(pure_ssh, "git-lfs used git-lfs-transfer:\n{trace}"),
    }
    let basic = site.server.metric("git_xet_lfs_basic_bytes_received_total") - basic_in;
    let xorb = site.server.metric("git_xet_xorb_bytes_received_total") - xorb_in;
    match (route, plain) {
        // git-lfs-authenticate's href and token let git-xet's agent speak XET.
        (Route::Authenticate, false) => assert!(xorb > 0.0 && basic == 0.0, "{xorb} {basic}"),
        // Otherwise objects arrive as basic uploads (over ssh, through the shell).
        _ => assert_eq!(basic as usize, big.len() + 6, "{trace}"),
    }

    // Another user clones with the same route: the files are smudged from the server.
    let carol = site.env("carol", plain);
    carol.git(
        &carol.dir("install"),
        &["config", "--global", "lfs.sshtransfer", sshtransfer],
    );
    let c = carol.dir("c");
    carol.git(&c, &["clone", "-q", &url, "."]);
    assert_same_file(&a.join("big.bin"), &c.join("big.bin"));
    assert_eq!(std::fs::read(c.join("small.bin")).unwrap(), b"small\n");

    // A reader may not upload objects, whichever route git-lfs takes.
    std::fs::write(c.join("new.bin"), payload(9, 1000)).unwrap();
    carol.git(&c, &["add", "new.bin"]);
    carol.git(&c, &["commit", "-qm", "new"]);
    let out = carol.git_output(&c, &["lfs", "push", "origin", "main"]);
    let said = stderr(&out);
    assert!(!out.status.success(), "a reader's LFS upload: {said}");
    assert!(
        said.contains("write access is needed") || said.contains("403"),
        "a reader's LFS upload: {said}"
    );
}

#[test]
fn lfs_over_ssh_through_git_lfs_authenticate_with_plain_git_lfs() {
    lfs_round_trip(true, Route::Authenticate);
}

#[test]
fn lfs_over_ssh_through_git_lfs_authenticate_with_git_xet_installed() {
    lfs_round_trip(false, Route::Authenticate);
}

#[test]
fn lfs_over_ssh_through_git_lfs_transfer_with_plain_git_lfs() {
    lfs_round_trip(true, Route::TransferNegotiated);
}

#[test]
fn lfs_over_ssh_through_git_lfs_transfer_with_git_xet_installed() {
    lfs_round_trip(false, Route::TransferAlways);
}

#[test]
fn user_add_prints_a_line_sshd_accepts_and_refuses_bad_keys() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let key =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIO64O9Iq6vaFV1fGGgFEgWul2qiXXeZcr3hGWJjfmnb0 dana@x";
    // The key's token is recorded in the deployment's index: a data directory without a
    // secret (a mistyped path) is refused.
    let out = git_xet()
        .args([
            "server", "user", "add", "dana", "--key", key, "--repo", "org/m",
        ])
        .arg("--data")
        .arg(&data)
        .output()
        .unwrap();
    failed_saying(out, "user add without a secret", "has no server secret");
    std::fs::create_dir_all(&data).unwrap();
    git_xet_identity::keys::Keys::load_or_create(&data).unwrap();
    let out = git_xet()
        .args([
            "server", "user", "add", "dana", "--key", key, "--repo", "org/m", "--scope", "write",
        ])
        .arg("--data")
        .arg(&data)
        .output()
        .unwrap();
    let line = String::from_utf8(env::ok(out, "user add").stdout).unwrap();
    assert!(line.starts_with("command=\""), "{line}");
    assert!(line.contains(" shell --user dana --data "), "{line}");
    assert!(line.contains(" --token-id "), "{line}");
    assert!(line.contains("--repo org/m:write\",no-port-forwarding,no-X11-forwarding,no-agent-forwarding,no-pty ssh-ed25519 "), "{line}");
    assert!(line.ends_with(" dana@x\n"), "{line}");
    if sshd::available() {
        // OpenSSH's own parser reads the line back as one key with these options.
        let file = dir.path().join("authorized_keys");
        std::fs::write(&file, &line).unwrap();
        let out = Command::new("ssh-keygen")
            .arg("-lf")
            .arg(&file)
            .output()
            .unwrap();
        assert!(env::ok(out, "ssh-keygen -l")
            .stdout
            .ends_with(b"dana@x (ED25519)\n"));
    }
    for (bad_key, repo, expected) in [
        ("ssh-ed25519 AAAA", "org/m", "invalid public key"),
        (
            "command=\"sh\" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIO64O9Iq6vaFV1fGGgFEgWul2qiXXeZcr3hGWJjfmnb0",
            "org/m",
            "invalid public key",
        ),
        (key, "../etc", "invalid repository name"),
        (key, "org/m:admin", "not read or write"),
    ] {
        let out = git_xet()
            .args([
                "server", "user", "add", "dana", "--key", bad_key, "--repo", repo,
            ])
            .arg("--data")
            .arg(&data)
            .arg("--authorized-keys")
            .arg(dir.path().join("never"))
            .output()
            .unwrap();
        failed_saying(out, &format!("user add {bad_key:?} {repo}"), expected);
        assert!(!dir.path().join("never").exists(), "nothing written");
    }
}

/// One git-lfs-transfer session spoken by hand over the real ssh channel.
pub(crate) struct Session {
    pub(crate) child: std::process::Child,
    out: std::process::ChildStdout,
    input: std::process::ChildStdin,
}

impl Session {
    pub(crate) fn start(site: &Site, user: &str, command: &str) -> Session {
        let ssh = site.sshd.ssh_command_as(user);
        let mut words = ssh.split_whitespace();
        let mut child = Command::new(words.next().unwrap())
            .args(words)
            .args(["-p", &site.sshd.port.to_string()])
            .arg(format!("{}@127.0.0.1", site.sshd.user))
            .arg(command)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let input = child.stdin.take().unwrap();
        Session { child, out, input }
    }

    pub(crate) fn send(&mut self, packets: &[&[u8]]) {
        use std::io::Write;
        for p in packets {
            match *p {
                b"FLUSH" => self.input.write_all(b"0000").unwrap(),
                b"DELIM" => self.input.write_all(b"0001").unwrap(),
                data => {
                    write!(self.input, "{:04x}", data.len() + 4).unwrap();
                    self.input.write_all(data).unwrap();
                }
            }
        }
        self.input.flush().unwrap();
    }

    /// Packets up to the next flush, as text (`DELIM` for a delimiter).
    pub(crate) fn answer(&mut self) -> Vec<String> {
        use std::io::Read;
        let mut lines = Vec::new();
        loop {
            let mut head = [0u8; 4];
            self.out.read_exact(&mut head).unwrap();
            let len = usize::from_str_radix(std::str::from_utf8(&head).unwrap(), 16).unwrap();
            match len {
                0 => return lines,
                1 => lines.push("DELIM".into()),
                n => {
                    let mut data = vec![0u8; n - 4];
                    self.out.read_exact(&mut data).unwrap();
                    lines.push(String::from_utf8_lossy(&data).trim_end().to_string());
                }
            }
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn git_lfs_transfer_refuses_wrong_bytes_and_stays_in_step() {
    let Some(site) = site(&[("alice", &["org/raw:write"])]) else {
        return;
    };
    let mut s = Session::start(&site, "alice", "git-lfs-transfer org/raw upload");
    assert_eq!(s.answer(), ["version=1", "locking"]);
    s.send(&[b"version 1\n", b"FLUSH"]);
    assert_eq!(s.answer(), ["status 200"]);
    // sha256("hello\n")
    let oid = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";
    let put = format!("put-object {oid}\n");
    let verify = format!("verify-object {oid}\n");
    let batch_line = format!("{oid} 6\n");

    s.send(&[
        b"batch\n",
        b"transfer=ssh\n",
        b"DELIM",
        batch_line.as_bytes(),
        b"FLUSH",
    ]);
    assert_eq!(
        s.answer(),
        [
            "status 200",
            "hash-algo=sha256",
            "DELIM",
            &format!("{oid} 6 upload")
        ]
    );
    // Other bytes under the oid: refused by the server, nothing stored, still in step.
    s.send(&[put.as_bytes(), b"size=6\n", b"DELIM", b"HELLO\n", b"FLUSH"]);
    let refused = s.answer();
    assert!(refused[0].starts_with("status 4"), "{refused:?}");
    s.send(&[verify.as_bytes(), b"size=6\n", b"FLUSH"]);
    assert_eq!(s.answer()[0], "status 404");
    // More bytes than the size: refused (its first six bytes are that object, which the
    // server may keep: they are its content).
    let world = "e258d248fda94c63753607f7c4494ee0fcbe92f1a76bfdac795c9d84101eb317";
    let put_world = format!("put-object {world}\n");
    s.send(&[
        put_world.as_bytes(),
        b"size=6\n",
        b"DELIM",
        b"world\n",
        b"and more",
        b"FLUSH",
    ]);
    assert_eq!(
        s.answer(),
        [
            "status 400",
            "DELIM",
            &format!("more data than the size of {world} (6 bytes)")
        ]
    );
    // The right bytes, in two packets: stored and verified.
    s.send(&[
        put.as_bytes(),
        b"size=6\n",
        b"DELIM",
        b"hel",
        b"lo\n",
        b"FLUSH",
    ]);
    assert_eq!(s.answer(), ["status 200"]);
    s.send(&[verify.as_bytes(), b"size=6\n", b"FLUSH"]);
    assert_eq!(s.answer(), ["status 200"]);
    s.send(&[b"batch\n", b"DELIM", batch_line.as_bytes(), b"FLUSH"]);
    assert_eq!(
        s.answer(),
        [
            "status 200",
            "hash-algo=sha256",
            "DELIM",
            &format!("{oid} 6 noop")
        ]
    );
    s.send(&[b"list-lock\n", b"FLUSH"]);
    assert_eq!(
        s.answer(),
        ["status 200", "DELIM"],
        "no locks (tests/git/ssh_shell_locks.rs)"
    );
    s.send(&[b"quit\n", b"FLUSH"]);
    assert_eq!(s.answer(), ["status 200"]);
    let status = s.child.wait().unwrap();
    assert!(status.success(), "the shell ends cleanly after quit");

    // A download session serves the stored bytes with their size.
    let mut d = Session::start(&site, "alice", "git-lfs-transfer org/raw download");
    assert_eq!(d.answer(), ["version=1", "locking"]);
    d.send(&[b"version 1\n", b"FLUSH"]);
    assert_eq!(d.answer(), ["status 200"]);
    let get = format!("get-object {oid}\n");
    d.send(&[get.as_bytes(), b"size=6\n", b"FLUSH"]);
    assert_eq!(d.answer(), ["status 200", "size=6", "DELIM", "hello"]);
    let missing = format!("get-object {}\n", "0".repeat(64));
    d.send(&[missing.as_bytes(), b"size=6\n", b"FLUSH"]);
    assert_eq!(d.answer()[0], "status 404");
    d.send(&[put.as_bytes(), b"size=6\n", b"DELIM", b"hello\n", b"FLUSH"]);
    assert_eq!(
        d.answer()[0],
        "status 405",
        "no uploads in a download session"
    );
}
