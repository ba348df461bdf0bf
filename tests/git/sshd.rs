//! A real OpenSSH `sshd` on 127.0.0.1, started by a test: its own host key, one authorized
//! client key whose forced command serves `git-upload-pack`/`git-receive-pack` from a test
//! server's repository directory and answers `git-lfs-authenticate` with that server's
//! Batch API URL and a token (the server-side `git xet shell` is another matter). Each
//! `git-lfs-authenticate` call is appended to a log, so tests can count ssh logins.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{git_xet_bin, ports, TestServer};

const SSHD: &str = "/usr/sbin/sshd";

pub struct Sshd {
    dir: tempfile::TempDir,
    pub port: u16,
    child: Child,
    /// The user ssh logs in as (the forced command runs as this user).
    pub user: String,
}

/// Whether sshd and the ssh client are here; without them, a test fails under CI and is
/// skipped (with the reason printed) elsewhere.
pub fn available() -> bool {
    let have = Path::new(SSHD).is_file()
        && Command::new("ssh")
            .arg("-V")
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    if !have {
        assert!(
            std::env::var_os("CI").is_none(),
            "{SSHD} or ssh is missing: .ci/deps/sshd.sh installs openssh-server"
        );
        eprintln!("skipped: {SSHD} or the ssh client is missing (apt-get install openssh-server)");
    }
    have
}

impl Sshd {
    /// sshd whose forced command serves `server`'s repositories; `git-lfs-authenticate`
    /// answers with a new token of the server for the repository and operation.
    pub fn start(server: &TestServer) -> Sshd {
        let dir = tempfile::tempdir().expect("temp dir");
        let d = dir.path();
        for key in ["host_key", "client_key"] {
            keygen(d, key);
        }
        let script = d.join("forced-command.sh");
        std::fs::write(
            &script,
            forced_command(&server.data, &server.url, &d.join("authenticate.log")),
        )
        .unwrap();
        set_mode(&script, 0o755);
        let client_pub = std::fs::read_to_string(d.join("client_key.pub")).unwrap();
        std::fs::write(
            d.join("authorized_keys"),
            format!(
                "command=\"{}\",no-port-forwarding,no-X11-forwarding,no-agent-forwarding,no-pty {client_pub}",
                script.display()
            ),
        )
        .unwrap();
        Sshd::launch(dir)
    }

    /// sshd with one client key per name in `keys` (`ssh_command_as(name)`) and an empty
    /// authorized_keys, which the test fills (sshd reads it at each login).
    pub fn start_empty(keys: &[&str]) -> Sshd {
        Sshd::start_empty_with(keys, "")
    }

    /// [`Sshd::start_empty`] with more sshd_config lines (e.g. `SetEnv NAME=value`).
    pub fn start_empty_with(keys: &[&str], config: &str) -> Sshd {
        let dir = tempfile::tempdir().expect("temp dir");
        keygen(dir.path(), "host_key");
        for key in keys {
            keygen(dir.path(), key);
        }
        std::fs::write(dir.path().join("authorized_keys"), "").unwrap();
        std::fs::write(dir.path().join("sshd_config.extra"), config).unwrap();
        Sshd::launch(dir)
    }

    /// `git xet server user add NAME --key <NAME's key> --data <server's data>
    /// --authorized-keys <this sshd's file>`; the caller adds `--repo`s and options.
    pub fn user_add(&self, server: &TestServer, name: &str) -> Command {
        let mut cmd = Command::new(git_xet_bin());
        cmd.args([
            "server",
            "user",
            "add",
            name,
            "--key",
            &self.public_key(name),
        ])
        .arg("--data")
        .arg(&server.data)
        .arg("--authorized-keys")
        .arg(self.authorized_keys());
        cmd
    }

    /// The authorized_keys file sshd reads.
    pub fn authorized_keys(&self) -> std::path::PathBuf {
        self.dir.path().join("authorized_keys")
    }

    /// The public key line of a client key made by `start_empty`.
    pub fn public_key(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{name}.pub")))
            .unwrap()
            .trim()
            .to_string()
    }

    /// sshd on a free loopback port for the keys and authorized_keys in `dir`. sshd cannot
    /// bind port 0 and say which it got: another port when it could not bind its own.
    fn launch(dir: tempfile::TempDir) -> Sshd {
        let user = std::env::var("USER")
            .ok()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| {
                let out = Command::new("id").arg("-un").output().expect("id -un");
                String::from_utf8_lossy(&out.stdout).trim().to_string()
            });
        let (port, child) =
            ports::start_on_a_free_port("sshd", |port| Sshd::spawn(dir.path(), port));
        Sshd {
            dir,
            port,
            child,
            user,
        }
    }

    /// sshd on `port`, once it says it listens there; `Err` when it exited first.
    fn spawn(d: &Path, port: u16) -> Result<(u16, Child), String> {
        let extra = std::fs::read_to_string(d.join("sshd_config.extra")).unwrap_or_default();
        std::fs::write(
            d.join("sshd_config"),
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nAuthorizedKeysFile {}\n\
                 StrictModes no\nUsePAM no\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
                 PermitRootLogin prohibit-password\nPidFile none\nLogLevel VERBOSE\n{extra}",
                d.join("host_key").display(),
                d.join("authorized_keys").display()
            ),
        )
        .unwrap();
        // As root, sshd wants its privilege separation directory.
        let _ = std::fs::create_dir_all("/run/sshd");
        let log = std::fs::File::create(d.join("sshd.log")).unwrap();
        let mut child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn sshd");
        let host_pub = std::fs::read_to_string(d.join("host_key.pub")).unwrap();
        let mut key = host_pub.split_whitespace();
        std::fs::write(
            d.join("known_hosts"),
            format!(
                "[127.0.0.1]:{port} {} {}\n",
                key.next().unwrap(),
                key.next().unwrap()
            ),
        )
        .unwrap();
        // Its own words, not a connection: one to that port could reach another process.
        let listening = format!("Server listening on 127.0.0.1 port {port}.");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let log = std::fs::read_to_string(d.join("sshd.log")).unwrap_or_default();
            if log.contains(&listening) {
                return Ok((port, child));
            }
            if let Some(status) = child.try_wait().unwrap() {
                return Err(format!("sshd exited with {status}:\n{log}"));
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("sshd not listening after 20 s:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }

    /// `GIT_SSH_COMMAND` for this server: the client key, its known host key, no agent and
    /// no user configuration.
    pub fn ssh_command(&self) -> String {
        self.ssh_command_as("client_key")
    }

    /// `GIT_SSH_COMMAND` logging in with the client key `key`.
    pub fn ssh_command_as(&self, key: &str) -> String {
        let d = self.dir.path();
        format!(
            "ssh -F /dev/null -i {} -o IdentitiesOnly=yes -o IdentityAgent=none -o BatchMode=yes \
             -o UserKnownHostsFile={} -o StrictHostKeyChecking=yes",
            d.join(key).display(),
            d.join("known_hosts").display()
        )
    }

    /// `ssh://user@127.0.0.1:port/<repo>.git`.
    pub fn url(&self, repo: &str) -> String {
        format!("ssh://{}@127.0.0.1:{}/{repo}.git", self.user, self.port)
    }

    /// From now on the server has no `git-lfs-authenticate` (exit 127, "not found"), as a
    /// server speaking only `git-lfs-transfer`.
    pub fn remove_authenticate(&self) {
        std::fs::write(self.dir.path().join("no-authenticate"), "").unwrap();
    }

    /// The `git-lfs-authenticate` calls so far, one `path operation` line each.
    pub fn authenticate_calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("authenticate.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn keygen(dir: &Path, name: &str) {
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(dir.join(name))
        .status()
        .expect("run ssh-keygen");
    assert!(status.success(), "ssh-keygen failed");
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The forced command: git's pack services on `DATA/repos/<path>` (created bare on first
/// push), `git-lfs-authenticate` answered with the server's endpoint for the path and a
/// token for it, and anything else (git-lfs-transfer among them) refused, as by a server
/// without it.
fn forced_command(data: &Path, url: &str, log: &Path) -> String {
    let q = |p: &Path| format!("'{}'", p.display());
    format!(
        r#"#!/bin/sh
set -eu
DATA={data}
LOG={log}
set -f
set -- $SSH_ORIGINAL_COMMAND
set +f
cmd=$1; shift
strip() {{ p=$(printf '%s' "$1" | tr -d "'"); p=${{p#/}}; printf '%s' "$p"; }}
case "$cmd" in
  git-upload-pack|git-receive-pack)
    repo="$DATA/repos/$(strip "$1")"
    if [ "$cmd" = git-receive-pack ] && [ ! -d "$repo" ]; then
      git init -q --bare "$repo"
    fi
    exec "$cmd" "$repo" ;;
  git-lfs-authenticate)
    if [ -e {off} ]; then
      echo "sh: 1: git-lfs-authenticate: not found" >&2; exit 127
    fi
    path=$(strip "$1"); path=${{path%.git}}
    case "$2" in upload) scope=write ;; *) scope=read ;; esac
    echo "$path $2" >> "$LOG"
    token=$({xet} server token create --repo "$path" --scope "$scope" --data "$DATA")
    printf '{{"href":"{url}/%s.git/info/lfs","header":{{"Authorization":"Bearer %s"}},"expires_in":3000}}\n' "$path" "$token" ;;
  *)
    echo "$cmd: not supported here" >&2; exit 1 ;;
esac
"#,
        data = q(data),
        log = q(log),
        off = q(&log.with_file_name("no-authenticate")),
        xet = q(&git_xet_bin().canonicalize().expect("the git-xet binary")),
        url = url.trim_end_matches('/'),
    )
}
