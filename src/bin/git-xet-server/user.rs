//! `git xet server user add`: the authorized_keys line giving a user's ssh key git and LFS
//! access through `git xet shell`. The key gets a token record of its own in the index (user,
//! grants, never an expiry) whose id the line passes to the shell: every token the shell
//! mints for the key carries it, so `git xet server token revoke ID` stops them all.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::data_dir;
use git_xet_deployment::IndexLocation;
use git_xet_identity::auth::Scope;
use git_xet_shell::access::Grant;
use git_xet_shell::authorized_keys::{self, PublicKey, ShellCommand};

#[derive(clap::Subcommand, Debug)]
pub(super) enum UserCommand {
    /// Write (with --authorized-keys) or print the authorized_keys line of a user's key:
    /// its forced command `git xet shell` serves git and git-lfs on the repositories named
    /// here, and nothing else (no shell, no forwarding).
    Add(UserAddArgs),
}

#[derive(clap::Args, Debug)]
pub(super) struct UserAddArgs {
    /// The user's name.
    name: String,
    /// The public key, as in the user's `.pub` file: `ssh-ed25519 AAAA... comment`.
    #[arg(long)]
    key: String,
    /// A repository the key may use, `org/name` or `org/*` (every repository of the
    /// organization), optionally with `:read`/`:write`; repeat for more.
    #[arg(long = "repo", value_name = "ORG/NAME[:SCOPE]", required = true)]
    repos: Vec<String>,
    /// Scope of the --repo arguments that name none.
    #[arg(long, value_parser = ["read", "write"], default_value = "read")]
    scope: String,
    /// Append the line to this authorized_keys file (created with mode 0600) instead of
    /// printing it.
    #[arg(long)]
    authorized_keys: Option<PathBuf>,
    /// The server's data directory, written into the command.
    #[arg(long, env = "GIT_XET_SERVER_DATA")]
    data: Option<PathBuf>,
    /// The deployment's index (`postgres://USER@HOST/DB`), written into the command so that
    /// the shell reads the signing secret where the servers do. A URL with a password is
    /// refused: leave this out and give the shell the URL through sshd's environment instead
    /// (`SetEnv GIT_XET_SERVER_INDEX=...` under `Match User`, in a file only root reads). Not read
    /// from GIT_XET_SERVER_INDEX: what goes into the line is spelled out here.
    #[arg(long, value_name = "URL")]
    index: Option<String>,
    /// Base URL git-lfs-authenticate hands out [default: the running server's].
    #[arg(long)]
    url: Option<String>,
    /// Refuse git-lfs-transfer for this key: git-lfs uses git-lfs-authenticate and HTTP.
    #[arg(long)]
    no_lfs_transfer: bool,
    /// The git-xet binary sshd runs [default: this one].
    #[arg(long)]
    program: Option<PathBuf>,
}

pub(super) fn run(command: UserCommand) -> anyhow::Result<ExitCode> {
    match command {
        UserCommand::Add(a) => add(a),
    }
}

fn add(args: UserAddArgs) -> anyhow::Result<ExitCode> {
    let scope = Scope::parse(&args.scope)
        .filter(|s| *s <= Scope::Write)
        .context("scope must be read or write")?;
    let grants = args
        .repos
        .iter()
        .map(|spec| git_xet_shell::access::parse_grant(spec, scope))
        .collect::<Result<Vec<_>, _>>()?;
    let key = PublicKey::parse(&args.key)?;
    let index = args
        .index
        .as_deref()
        .map(IndexLocation::parse)
        .transpose()?;
    let data = data_dir(args.data)?;
    let data = std::path::absolute(&data).unwrap_or(data);
    let program = match args.program {
        Some(p) => std::path::absolute(&p).unwrap_or(p),
        None => std::env::current_exe()
            .and_then(|exe| exe.canonicalize())
            .context("finding this program's path; pass --program")?,
    };
    let token_id = record_key_token(&data, index.as_ref(), &args.name, &grants)?;
    let line = authorized_keys::line(
        &ShellCommand {
            program: &program,
            user: &args.name,
            data_dir: &data,
            grants: &grants,
            public_url: args.url.as_deref(),
            no_lfs_transfer: args.no_lfs_transfer,
            index: index.as_ref(),
            token_id: Some(&token_id),
        },
        &key,
    )?;
    match args.authorized_keys {
        Some(path) => {
            authorized_keys::append(&path, &line)
                .with_context(|| format!("appending to {}", path.display()))?;
            eprintln!(
                "added {}'s key to {} (token id {token_id}: `git xet server token revoke {token_id}` stops its LFS tokens)",
                args.name,
                path.display()
            );
        }
        None => println!("{line}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// Expiry recorded for a key's token: keys do not expire (the tokens minted for them do).
const KEY_NEVER_EXPIRES: u64 = 253_402_300_799; // 9999-12-31T23:59:59Z

/// Records the key's token in the deployment's index (`--index`, else GIT_XET_SERVER_INDEX,
/// which is read here but never written into the line, else the data directory's SQLite)
/// and returns its id.
fn record_key_token(
    data: &std::path::Path,
    index: Option<&IndexLocation>,
    user: &str,
    grants: &[Grant],
) -> anyhow::Result<String> {
    use git_xet_deployment::{open_index, DeploymentConfig};
    use git_xet_identity::auth::new_token_id;
    use git_xet_index::TokenRecord;
    use git_xet_io::time::now_secs;
    let mut config = DeploymentConfig::embedded(data);
    let from_env = std::env::var("GIT_XET_SERVER_INDEX").ok();
    match (index, from_env) {
        (Some(index), _) => config.index = index.clone(),
        (None, Some(url)) => config.index = IndexLocation::parse(&url)?,
        (None, None) => {}
    }
    let index = open_index(&config).context(
        "opening the deployment's index to record the key's token (pass the servers' --data, \
         and their --index or GIT_XET_SERVER_INDEX when it is PostgreSQL)",
    )?;
    let id = new_token_id();
    let scope = grants
        .iter()
        .map(Grant::scope_granted)
        .max()
        .unwrap_or(Scope::Read);
    let specs: Vec<String> = grants.iter().map(Grant::spec).collect();
    index
        .record_token(&TokenRecord {
            id: id.clone(),
            user: user.to_string(),
            repo: format!("ssh:{}", specs.join(",")),
            scope: scope.as_str().to_string(),
            created: now_secs(),
            expires: KEY_NEVER_EXPIRES,
            revoked: false,
        })
        .context("recording the key's token in the index")?;
    Ok(id)
}
