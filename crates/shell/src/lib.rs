//! `git xet shell`: git and git-lfs over OpenSSH. sshd runs it as the forced command of a
//! user's key (`command="git xet shell --user alice --data DIR --repo org/m:write",...`);
//! it reads the client's `SSH_ORIGINAL_COMMAND` and serves exactly four commands on hosted
//! repositories, with the access the key's own command line grants ([`access`]):
//!
//! | command                             | served by                                        |
//! |-------------------------------------|--------------------------------------------------|
//! | `git-upload-pack <repo>`            | git, on `<repos>/<repo>.git` ([`git`])           |
//! | `git-receive-pack <repo>`           | git, with the pre-receive hook calling the server |
//! | `git-lfs-authenticate <repo> <op>`  | the LFS href and a short-lived token ([`authenticate`]) |
//! | `git-lfs-transfer <repo> <op>`      | git-lfs's ssh protocol, through the server's HTTP API ([`transfer`]) |
//!
//! Anything else is refused on stderr with a non-zero exit, and nothing runs. The shell
//! never opens the object store: git reads the repository directory, and LFS goes through
//! the running server, found through `DATA/server.json` (git_xet_deployment::running). It reads the index
//! only for the signing secret when that lives there (`--index postgres://...`).

pub mod access;
pub mod authenticate;
pub mod authorized_keys;
pub mod command;
pub mod git;
pub mod transfer;

use std::path::PathBuf;

use access::Rules;
use command::SshCommand;
use git_xet_identity::auth::Scope;
use git_xet_identity::keys::Keys;

/// Why the shell refused or failed. The message is what the ssh user sees.
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    /// The client asked for something not served here.
    #[error("{0}")]
    Refused(String),
    /// The key's rules do not allow it.
    #[error("{}", denied(user, repo, *need, *have))]
    Denied {
        user: String,
        repo: String,
        need: Scope,
        have: Option<Scope>,
    },
    /// The key's token record was revoked (`git xet server token revoke`).
    #[error("{user}'s ssh access was revoked (token {id}); ask the server's admin to add the key again (`git xet server user add`)")]
    Revoked { user: String, id: String },
    #[error("repository {0} does not exist")]
    NoRepo(String),
    /// The forced command's own arguments are wrong (an admin's mistake).
    #[error("{0}")]
    BadSetting(String),
    #[error("{0}")]
    NoServer(String),
    #[error("the server secret: {0}")]
    Secret(String),
    #[error("{0}")]
    Git(String),
    /// The server answered an LFS request with an error.
    #[error("the server answered {status}: {message}")]
    Upstream { status: u16, message: String },
    /// The client broke git-lfs's ssh protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
}

impl From<git_xet_deployment::running::NoServer> for ShellError {
    fn from(e: git_xet_deployment::running::NoServer) -> Self {
        ShellError::NoServer(e.0)
    }
}

fn denied(user: &str, repo: &str, need: Scope, have: Option<Scope>) -> String {
    match have {
        None => format!("{user} has no access to repository {repo} (or it does not exist)"),
        Some(have) => format!(
            "{user} has {} access to repository {repo}; {} access is needed",
            have.as_str(),
            need.as_str()
        ),
    }
}

/// The shell's settings: from the forced command's arguments.
#[derive(Debug, Clone)]
pub struct Settings {
    pub rules: Rules,
    /// The server's data directory (repositories, secret, server.json).
    pub data_dir: PathBuf,
    /// The base URL handed out in git-lfs-authenticate's href, instead of the server's own.
    pub public_url: Option<String>,
    /// Lifetime of git-lfs-authenticate's token, in seconds.
    pub token_ttl: u64,
    /// The git-xet binary the pre-receive hook runs (this one).
    pub program: Option<PathBuf>,
    /// Refuse `git-lfs-transfer`, so that git-lfs uses `git-lfs-authenticate` and HTTP
    /// (git-lfs before 3.4 has no client-side switch for it).
    pub no_lfs_transfer: bool,
    /// The deployment's index when it is not the data directory's SQLite (the signing
    /// secret then lives there).
    pub index: Option<git_xet_deployment::IndexLocation>,
    /// The key's recorded token id (`--token-id`), which the tokens minted here carry.
    pub token_id: Option<String>,
}

impl Settings {
    /// Who the tokens this session mints are for: the key's user, with the key's recorded
    /// token id (revoking it stops them), or a fresh id for a line without one.
    pub fn holder(&self) -> git_xet_identity::auth::Holder {
        git_xet_identity::auth::Holder {
            id: self
                .token_id
                .clone()
                .unwrap_or_else(git_xet_identity::auth::new_token_id),
            user: self.rules.user.clone(),
        }
    }

    /// The deployment as the shell reads it: the data directory, and the shared index when
    /// it is not the data directory's SQLite.
    fn deployment(&self) -> git_xet_deployment::DeploymentConfig {
        let mut config = git_xet_deployment::DeploymentConfig::embedded(&self.data_dir);
        if let Some(index) = &self.index {
            config.index = index.clone();
        }
        config
    }

    /// Refuses every command of a key whose token record was revoked: git over ssh as well as
    /// the LFS tokens minted here (which the server refuses by the same id). A line without
    /// a token id (written before keys had one) is not checked.
    pub fn not_revoked(&self) -> Result<(), ShellError> {
        let Some(id) = &self.token_id else {
            return Ok(());
        };
        let revoked = git_xet_deployment::token_revoked(&self.deployment(), id).map_err(|e| {
            ShellError::Secret(format!(
                "cannot read this key's token in the index ({e}): is --data the server's \
                     data directory? (a deployment whose index is PostgreSQL needs the servers' \
                     --index here too)"
            ))
        })?;
        if revoked {
            return Err(ShellError::Revoked {
                user: self.rules.user.clone(),
                id: id.clone(),
            });
        }
        Ok(())
    }

    /// The deployment's signing keys: from `DATA/keys/secret`, or from the shared index
    /// (`--index postgres://...`), where every server process of the deployment reads them.
    /// Read only: the shell never creates a secret or migrates the index's schema.
    pub fn keys(&self) -> Result<Keys, ShellError> {
        use git_xet_deployment::KeysError;
        let config = self.deployment();
        let secret = git_xet_identity::keys::secret_path(&self.data_dir);
        git_xet_deployment::read_keys(&config).map_err(|e| match e {
            KeysError::NoSecret { .. } => ShellError::Secret(format!(
                "{} does not exist: is --data the server's data directory? (a deployment \
                 whose index is PostgreSQL needs the servers' --index here too)",
                secret.display()
            )),
            KeysError::Io { source, .. } => {
                ShellError::Secret(format!("cannot read {} ({source})", secret.display()))
            }
            KeysError::NoSharedSecret => ShellError::Secret(e.to_string()),
            KeysError::Index(e) => ShellError::Secret(e.to_string()),
        })
    }
}

/// Serves `original` (the client's command) on this process's stdin and stdout; returns
/// the exit status for sshd.
pub fn run(settings: &Settings, original: Option<&str>) -> Result<i32, ShellError> {
    let Some(original) = original else {
        return Err(ShellError::Refused(format!(
            "hi {}: this account serves git and git-lfs only, no interactive shell",
            settings.rules.user
        )));
    };
    let command = SshCommand::parse(original)?;
    settings.not_revoked()?;
    match command {
        SshCommand::UploadPack(repo) => {
            settings.rules.require(&repo, Scope::Read)?;
            Ok(exit_code(git::serve(settings, &repo, false)?))
        }
        SshCommand::ReceivePack(repo) => {
            settings.rules.require(&repo, Scope::Write)?;
            Ok(exit_code(git::serve(settings, &repo, true)?))
        }
        SshCommand::LfsAuthenticate(repo, op) => {
            settings.rules.require(&repo, op.scope())?;
            let keys = settings.keys()?;
            let base = match &settings.public_url {
                Some(url) => url.clone(),
                None => {
                    let urls = git_xet_deployment::running::read(&settings.data_dir)?;
                    urls.public_url.unwrap_or(urls.internal_url)
                }
            };
            let answer = authenticate::answer(
                &keys,
                &base,
                &repo,
                op.scope(),
                settings.token_ttl,
                &settings.holder(),
            );
            let json = serde_json::to_string(&answer).expect("answer serializes");
            // The command's answer: git-lfs reads it from ssh's stdout (the shell is the program).
            println!("{json}");
            Ok(0)
        }
        SshCommand::LfsTransfer(repo, op) => {
            settings.rules.require(&repo, op.scope())?;
            if settings.no_lfs_transfer {
                return Err(ShellError::Refused(
                    "git-lfs-transfer is turned off for this key (--no-lfs-transfer); \
                     git-lfs falls back to git-lfs-authenticate"
                        .into(),
                ));
            }
            let keys = settings.keys()?;
            let urls = git_xet_deployment::running::read(&settings.data_dir)?;
            let upstream = transfer::upstream::Upstream::new(
                &urls.internal_url,
                repo,
                keys,
                op.scope(),
                settings.holder(),
            )?;
            let out = std::io::BufWriter::with_capacity(128 * 1024, std::io::stdout());
            let mut io = transfer::pkt::PktIo::new(std::io::stdin(), out);
            transfer::serve(&mut io, op, &upstream)?;
            Ok(0)
        }
    }
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    status.code().unwrap_or(1)
}
