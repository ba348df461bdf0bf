//! Credentials asked on the terminal: with no helper and a terminal, `git credential fill`
//! prompts through git (as git-lfs would), and only then; `GIT_TERMINAL_PROMPT=0` forbids it.
//! Driven through `git xet status`, whose Batch API request needs the credentials, on a
//! pseudo-terminal made by script(1).

use std::io::{Read, Write};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::env::*;
use crate::support::TestServer;

/// Waits until the terminal output so far contains `what`; returns all of it.
fn wait_for(shown: &Arc<Mutex<Vec<u8>>>, what: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = String::from_utf8_lossy(&shown.lock().unwrap()).into_owned();
        if text.contains(what) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "no {what:?} on the terminal:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `git xet status` on a terminal; `answer` types the user name and the token at git's
/// prompts. Returns what the terminal showed.
fn status_on_a_terminal(env: &GitEnv, repo: &std::path::Path, prompt: bool, token: &str) -> String {
    let run = format!(
        "'{}' status --remote origin",
        crate::support::git_xet_bin().display()
    );
    let mut command = env.command("script", repo);
    command
        .args(["-qec", &run, "/dev/null"])
        .env_remove("GIT_ASKPASS")
        .env_remove("SSH_ASKPASS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if prompt {
        command.env_remove("GIT_TERMINAL_PROMPT");
    }
    let mut child = command.spawn().expect("run script(1) from util-linux");
    let shown = Arc::new(Mutex::new(Vec::new()));
    let mut out = child.stdout.take().unwrap();
    let sink = shown.clone();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = out.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    let mut input = child.stdin.take().unwrap();
    if prompt {
        // git reads each answer only after it has shown its prompt (and flushes the terminal's
        // input before reading a password), so each is typed when its prompt is there.
        wait_for(&shown, "Username for");
        input.write_all(b"x\n").unwrap();
        wait_for(&shown, "Password for");
        input.write_all(format!("{token}\n").as_bytes()).unwrap();
    }
    let status = child.wait().unwrap();
    drop(input);
    reader.join().unwrap();
    let text = String::from_utf8_lossy(&shown.lock().unwrap()).into_owned();
    assert!(status.success(), "git xet status failed:\n{text}");
    text
}

#[test]
fn credentials_are_asked_on_the_terminal_only_where_git_may_prompt() {
    let server = TestServer::start();
    let env = GitEnv::with_agent(&[]);
    let repo = env.init_repo("work");
    env.git(
        &repo,
        &[
            "push",
            "-q",
            &remote_url(&server, "org/prompt", "write"),
            "HEAD:main",
        ],
    );
    let plain = format!("http://{}/org/prompt.git", server.addr());
    env.git(&repo, &["remote", "add", "origin", &plain]);
    let token = server.token("org/prompt", "read");

    // A terminal and prompts allowed: git asks, and the answer authorizes the request.
    let shown = status_on_a_terminal(&env, &repo, true, &token);
    assert!(shown.contains("transfers:      xet"), "{shown}");

    // Prompts forbidden: nothing is asked, and the request is refused (the transfer is then
    // left to git-lfs).
    let shown = status_on_a_terminal(&env, &repo, false, &token);
    // (git's own refusal, quoted in the reason: it did not ask.)
    assert!(shown.contains("terminal prompts disabled"), "{shown}");
    assert!(
        shown.contains("transfers:      git-lfs (hand-off"),
        "{shown}"
    );
}
