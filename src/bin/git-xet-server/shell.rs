//! `git xet shell`: the forced command of an ssh key (see git_xet_shell).

use std::path::PathBuf;
use std::process::ExitCode;

use git_xet_deployment::IndexLocation;
use git_xet_identity::auth::Scope;
use git_xet_shell::{access, ShellError};

#[derive(clap::Args, Debug)]
pub struct ShellArgs {
    /// The user this key belongs to (reflogs, messages).
    #[arg(long)]
    user: String,
    /// The data directory of a server process on this machine (its `server.json` says
    /// where it listens; with the default SQLite index it also holds the signing secret).
    #[arg(long, env = "GIT_XET_SERVER_DATA")]
    data: PathBuf,
    /// The deployment's index, as the servers were given it: with `postgres://...` the
    /// signing secret is read there. A URL with a password belongs in sshd's environment
    /// (`SetEnv GIT_XET_SERVER_INDEX=...`), not in authorized_keys.
    #[arg(long, env = "GIT_XET_SERVER_INDEX", value_name = "URL")]
    index: Option<String>,
    /// A repository this key may use: `org/name:read`, `org/name:write`, or `org/*:SCOPE`
    /// for every repository of an organization (repeat for more). Without any, nothing.
    #[arg(long = "repo", value_name = "ORG/NAME:SCOPE")]
    repos: Vec<String>,
    /// Base URL of the server for git-lfs-authenticate's href [default: the running
    /// server's --public-url, else its listener].
    #[arg(long, env = "GIT_XET_SERVER_PUBLIC_URL")]
    url: Option<String>,
    /// Lifetime in seconds of the token git-lfs-authenticate hands out.
    #[arg(long, default_value_t = 3600, value_parser = clap::value_parser!(u64).range(60..))]
    token_ttl: u64,
    /// Refuse git-lfs-transfer (git-lfs's pure ssh protocol): git-lfs then asks
    /// git-lfs-authenticate and moves objects over HTTP(S) directly.
    #[arg(long)]
    no_lfs_transfer: bool,
    /// The id of this key's token record (`user add` writes it): every token minted for the
    /// key carries it, so that `git xet server token revoke ID` stops them. Without it (lines
    /// written before ids were recorded) each token gets a fresh id nothing can revoke.
    #[arg(long, value_name = "ID")]
    token_id: Option<String>,
}

fn settings(args: ShellArgs) -> Result<git_xet_shell::Settings, ShellError> {
    let grants = args
        .repos
        .iter()
        .map(|spec| access::parse_grant(spec, Scope::Read))
        .collect::<Result<Vec<_>, _>>()?;
    // The id travels in fetch URLs' query strings: letters, digits, `-` and `_` only.
    if let Some(id) = &args.token_id {
        let ok = !id.is_empty()
            && id.len() <= 64
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !ok {
            return Err(ShellError::BadSetting(format!(
                "--token-id {id:?} is not a token id (as `git xet server token list` shows them)"
            )));
        }
    }
    if let Some(url) = &args.url {
        git_xet_deployment::running::check_url(url)
            .map_err(|e| ShellError::BadSetting(e.to_string()))?;
    }
    let index = args
        .index
        .as_deref()
        .map(IndexLocation::parse)
        .transpose()
        .map_err(|e| ShellError::BadSetting(e.to_string()))?;
    Ok(git_xet_shell::Settings {
        rules: access::Rules::new(&args.user, grants)?,
        data_dir: std::path::absolute(&args.data).unwrap_or(args.data),
        public_url: args.url,
        token_ttl: args.token_ttl,
        program: std::env::current_exe()
            .and_then(|exe| exe.canonicalize())
            .ok(),
        no_lfs_transfer: args.no_lfs_transfer,
        index,
        token_id: args.token_id,
    })
}

/// Serves the client's command; refusals and failures go to stderr (the ssh user sees
/// them) with exit status 1. stdout belongs to the protocol.
pub fn shell(args: ShellArgs) -> anyhow::Result<ExitCode> {
    crate::common::logging::init("warn");
    let original = std::env::var("SSH_ORIGINAL_COMMAND").ok();
    let result = settings(args).and_then(|s| git_xet_shell::run(&s, original.as_deref()));
    match result {
        Ok(0) => Ok(ExitCode::SUCCESS),
        Ok(code) => Ok(ExitCode::from(u8::try_from(code).unwrap_or(1))),
        Err(e) => {
            eprintln!("git-xet shell: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}
