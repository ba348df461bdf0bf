//! The library's ssh authentication against a real sshd: the agent's token refresh asks
//! `git-lfs-authenticate` for an ssh remote (once per process while the answer is good),
//! `core.sshCommand` is honoured, and `remote.<name>.pushurl` decides uploads.

use git_xet_git::endpoint::{self, Source};
use git_xet_git::repo::Repo;
use git_xet_git::ssh::SshFailure;
use git_xet_git::GitError;
use git_xet_lfs::protocol::Operation;

use crate::env::GitEnv;
use crate::sshd::{self, Sshd};
use crate::support::TestServer;

#[test]
fn token_refresh_authorization_comes_from_git_lfs_authenticate_once() {
    if !sshd::available() {
        return;
    }
    let server = TestServer::start();
    let sshd = Sshd::start(&server);
    let env = GitEnv::new();
    let a = env.lfs_repo("a", &sshd.url("org/refresh"));
    // core.sshCommand (no GIT_SSH_COMMAND in this process) reaches the test's sshd.
    env.git(&a, &["config", "core.sshCommand", &sshd.ssh_command()]);
    let repo = Repo::discover(&a).unwrap();
    let url = format!("{}/org/refresh.git/info/lfs", server.url);
    let given = |repo: &Repo| {
        endpoint::authenticator(repo, "origin", Operation::Download)
            .unwrap()
            .given_authorization()
            .expect("an ssh remote's authenticator sends git-lfs-authenticate's header")
            .unwrap()
    };
    let first = given(&repo);
    assert!(first.starts_with("Bearer "), "the server's token");
    let again = given(&repo);
    assert_eq!(first, again);
    assert_eq!(
        sshd.authenticate_calls(),
        ["org/refresh download"],
        "one login for both:\n{}",
        sshd.log()
    );
    // The Batch API endpoint is the href git-lfs-authenticate named; its Authorization
    // is the same answer's (never git's credentials), not a header of the endpoint.
    let resolved = endpoint::resolve(&repo, "origin", Operation::Download)
        .unwrap()
        .unwrap();
    assert_eq!(resolved.endpoint.url, url);
    assert_eq!(resolved.auth.given_authorization().unwrap().unwrap(), first);
    assert!(!resolved
        .endpoint
        .header
        .keys()
        .any(|k| k.eq_ignore_ascii_case("authorization")));

    // git's scp-like form with a port reaches the same server, for git and for us.
    let scp = format!("[{}@127.0.0.1:{}]:org/refresh.git", sshd.user, sshd.port);
    env.git(&a, &["remote", "add", "scp", &scp]);
    // (git reaches the forced command with the path; nothing was pushed there yet)
    let out = env.git_output(&a, &["ls-remote", "scp"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("data/repos/org/refresh.git"), "{said}");
    let repo = Repo::discover(&a).unwrap();
    let resolved = endpoint::resolve(&repo, "scp", Operation::Upload)
        .unwrap()
        .unwrap();
    assert_eq!(resolved.endpoint.url, url);
    assert_eq!(sshd.authenticate_calls().len(), 2, "a new login for upload");

    // lfs.sshtransfer=always: the pure ssh protocol only, which git-lfs speaks.
    env.git(&a, &["config", "lfs.sshtransfer", "always"]);
    let repo = Repo::discover(&a).unwrap();
    let refused = endpoint::resolve(&repo, "scp", Operation::Download).err();
    assert!(
        matches!(
            refused,
            Some(GitError::SshAuthenticate {
                kind: SshFailure::Disabled,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(sshd.authenticate_calls().len(), 2, "no login");
    env.git(&a, &["config", "--unset", "lfs.sshtransfer"]);

    // Uploads go where the push URL says; downloads where the URL says.
    env.git(
        &a,
        &[
            "remote",
            "set-url",
            "origin",
            &format!("{}/org/refresh.git", server.url),
        ],
    );
    env.git(
        &a,
        &["config", "remote.origin.pushurl", &sshd.url("org/refresh")],
    );
    let repo = Repo::discover(&a).unwrap();
    assert!(matches!(
        endpoint::source(&repo, "origin", Operation::Upload).unwrap(),
        Source::Ssh { .. }
    ));
    assert_eq!(
        endpoint::source(&repo, "origin", Operation::Download).unwrap(),
        Source::Http(format!("{}/org/refresh.git/info/lfs", server.url))
    );
}
