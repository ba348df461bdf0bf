//! `git xet transfer` as a process: the protocol over real pipes, including malformed and
//! out-of-order input. Transfers that need a server are in the end-to-end tests.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::env::GitEnv;
use crate::support::{random_bytes, TestServer};

const OID: &str = "22ab5f63670800cc7be06dbed816012b0dc411e774754c7579467d2536a9cf3e";

struct Agent {
    child: Child,
    out: BufReader<std::process::ChildStdout>,
}

impl Agent {
    fn start(env: &GitEnv, dir: &std::path::Path) -> Agent {
        let mut child = env
            .command(crate::support::git_xet_bin(), dir)
            .arg("transfer")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        Agent { child, out }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn answer(&mut self) -> Value {
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        assert!(
            line.ends_with('\n'),
            "answer not newline-terminated: {line:?}"
        );
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }

    fn exchange(&mut self, line: &str) -> Value {
        self.send(line);
        self.answer()
    }

    /// Closes stdin and waits (bounded) for the exit status.
    fn finish(mut self) -> (std::process::ExitStatus, String) {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let mut rest = String::new();
                std::io::Read::read_to_string(&mut self.out, &mut rest).unwrap();
                assert_eq!(rest, "", "nothing after the last answer");
                let mut err = String::new();
                std::io::Read::read_to_string(self.child.stderr.as_mut().unwrap(), &mut err)
                    .unwrap();
                return (status, err);
            }
            assert!(Instant::now() < deadline, "agent did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `answer` carries an error of `code` whose message mentions `needle`.
fn assert_error(answer: &Value, code: i64, needle: &str) {
    assert_eq!(answer["error"]["code"], code, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains(needle),
        "{answer}"
    );
}

fn init(op: &str) -> String {
    format!(
        r#"{{"event":"init","operation":"{op}","remote":"origin","concurrent":true,"concurrenttransfers":3}}"#
    )
}

#[test]
fn init_outside_a_repository_fails_with_code_32() {
    let env = GitEnv::new();
    let mut agent = Agent::start(&env, &env.dir("nowhere"));
    let answer = agent.exchange(&init("download"));
    assert_error(&answer, 32, "not inside a git repository");
    agent.send(r#"{"event":"terminate"}"#);
    let (status, _) = agent.finish();
    assert!(status.success());
}

/// `init` is answered before git confirms a directory that looks like a repository; when git
/// then disagrees, each transfer fails with git's reason and the agent goes on.
#[test]
fn a_directory_that_only_looks_like_a_repository_fails_each_transfer_clearly() {
    let env = GitEnv::new();
    let dir = env.dir("looks-like-a-repo");
    std::fs::create_dir(dir.join(".git")).unwrap();
    let mut agent = Agent::start(&env, &dir);
    assert_eq!(agent.exchange(&init("download")), serde_json::json!({}));
    for _ in 0..2 {
        let answer = agent.exchange(&format!(r#"{{"event":"download","oid":"{OID}","size":3}}"#));
        assert_eq!(answer["event"], "complete", "{answer}");
        assert_eq!(answer["oid"], OID, "{answer}");
        assert_error(&answer, 2, "not inside a git repository");
    }
    agent.send(r#"{"event":"terminate"}"#);
    let (status, _) = agent.finish();
    assert!(status.success());
}

#[test]
fn bad_requests_get_clear_answers_and_the_agent_goes_on() {
    let env = GitEnv::new();
    let repo = env.init_repo("repo");
    let mut agent = Agent::start(&env, &repo);
    let before_init = agent.exchange(&format!(r#"{{"event":"download","oid":"{OID}","size":3}}"#));
    assert_eq!(before_init["event"], "complete");
    assert_eq!(before_init["error"]["code"], 2);
    assert_eq!(agent.exchange(&init("download")), serde_json::json!({}));
    let garbage = agent.exchange("{not json");
    assert!(garbage["error"]["message"]
        .as_str()
        .unwrap()
        .contains("not valid JSON"));
    // No xet action (the server did not offer xet): a per-object error, not a crash.
    let no_action = agent.exchange(&format!(r#"{{"event":"download","oid":"{OID}","size":3}}"#));
    assert_eq!(no_action["oid"], OID);
    assert_eq!(no_action["error"]["code"], 2);
    assert!(
        no_action["error"]["message"]
            .as_str()
            .unwrap()
            .contains("xet"),
        "{no_action}"
    );
    let wrong_way = agent.exchange(&format!(
        r#"{{"event":"upload","oid":"{OID}","size":3,"path":"/x"}}"#
    ));
    assert!(wrong_way["error"]["message"]
        .as_str()
        .unwrap()
        .contains("initialised for download"));
    agent.send(r#"{"event":"terminate"}"#);
    let (status, stderr) = agent.finish();
    assert!(status.success(), "{stderr}");
}

#[test]
fn closing_stdin_without_terminate_exits_non_zero_without_hanging() {
    let env = GitEnv::new();
    let repo = env.init_repo("repo");
    let mut agent = Agent::start(&env, &repo);
    assert_eq!(agent.exchange(&init("upload")), serde_json::json!({}));
    let (status, stderr) = agent.finish();
    assert!(!status.success());
    assert!(stderr.contains("without `terminate`"), "{stderr}");
}

#[test]
fn an_expiring_token_is_refreshed_through_href_with_git_credentials() {
    let server = TestServer::start();
    let token = server.token("org/refresh", "write");
    let env = GitEnv::new();
    // The credentials come from a helper, not the URL: the agent must ask git for them.
    let helper = format!("!f() {{ echo username=x; echo password={token}; }}; f");
    env.git(
        &env.dir("."),
        &["config", "--global", "credential.helper", &helper],
    );
    let repo = env.init_repo("repo");
    env.git(
        &repo,
        &[
            "remote",
            "add",
            "origin",
            &format!("http://{}/org/refresh.git", server.addr()),
        ],
    );
    refresh_round_trip(&server, &env, &repo, &token);
}

/// For an ssh remote, the agent's token refresh is authorized by `git-lfs-authenticate`
/// over ssh (real sshd), as git-lfs authorized the batch.
#[test]
fn an_expiring_token_of_an_ssh_remote_is_refreshed_with_git_lfs_authenticate() {
    if !crate::sshd::available() {
        return;
    }
    let server = TestServer::start();
    let sshd = crate::sshd::Sshd::start(&server);
    let env = GitEnv::new().with_env("GIT_SSH_COMMAND", &sshd.ssh_command());
    let repo = env.init_repo("repo");
    env.git(
        &repo,
        &["remote", "add", "origin", &sshd.url("org/refresh")],
    );
    refresh_round_trip(&server, &env, &repo, "no-token-here");
    assert_eq!(
        sshd.authenticate_calls(),
        ["org/refresh upload", "org/refresh download"],
        "one login per agent session:\n{}",
        sshd.log()
    );
}

/// An upload and a download through the agent with a stale CAS token and no
/// `Authorization` in the action: only a refresh through `href`, authorized the way the
/// remote is, can work.
fn refresh_round_trip(server: &TestServer, env: &GitEnv, repo: &std::path::Path, token: &str) {
    let data = random_bytes(3 << 20, 71);
    let file = repo.join("f.bin");
    std::fs::write(&file, &data).unwrap();
    let oid = {
        use sha2::Digest;
        let d = sha2::Sha256::digest(&data);
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    // A token that is useless and about to expire: only a refresh through `href` can work.
    let soon = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 5;
    let action = |op: &str, extra: &str| {
        format!(
            r#"{{"href":"{}/org/refresh.git/info/lfs/xet-{op}-token","header":{{"X-Xet-Cas-Url":"{}","X-Xet-Access-Token":"stale","X-Xet-Token-Expiration":"{soon}"{extra}}}}}"#,
            server.url, server.url
        )
    };
    let mut agent = Agent::start(env, repo);
    assert_eq!(agent.exchange(&init("upload")), serde_json::json!({}));
    agent.send(&format!(
        r#"{{"event":"upload","oid":"{oid}","size":{},"path":"{}","action":{}}}"#,
        data.len(),
        file.display(),
        action("write", "")
    ));
    let done = loop {
        let a = agent.answer();
        if a["event"] == "complete" {
            break a;
        }
    };
    assert!(done.get("error").is_none(), "{done}");
    agent.send(r#"{"event":"terminate"}"#);
    assert!(agent.finish().0.success());

    let hash = env.xet(repo, &["hash", "f.bin"]);
    let hash = hash.split_whitespace().next().unwrap();
    // The upload filled the chunk store: without it the download goes to the server (and
    // refreshes its token there).
    let _ = std::fs::remove_dir_all(env.store_dir());
    let mut agent = Agent::start(env, repo);
    assert_eq!(agent.exchange(&init("download")), serde_json::json!({}));
    agent.send(&format!(
        r#"{{"event":"download","oid":"{oid}","size":{},"action":{}}}"#,
        data.len(),
        action("read", &format!(r#","X-Xet-Hash":"{hash}""#))
    ));
    let done = loop {
        let a = agent.answer();
        if a["event"] == "complete" {
            break a;
        }
    };
    let path = done["path"].as_str().unwrap_or_else(|| panic!("{done}"));
    assert!(
        path.starts_with(repo.join(".git/lfs/tmp").to_str().unwrap()),
        "{path}"
    );
    assert_eq!(std::fs::read(path).unwrap(), data);
    agent.send(r#"{"event":"terminate"}"#);
    let (status, log) = agent.finish();
    assert!(status.success());
    assert!(!log.contains(token), "tokens are never logged");
    let refreshes: f64 = server
        .metrics()
        .lines()
        .filter(|l| {
            l.starts_with("git_xet_http_requests_total{route=\"lfs_xet_token\",status=\"200\"}")
        })
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum();
    assert!(
        refreshes >= 2.0,
        "one refresh per session expected, saw {refreshes}"
    );
}
