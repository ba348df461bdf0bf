//! `git xet server token`: create, list and revoke access tokens.

use std::process::ExitCode;

use anyhow::Context;

use super::deployment::DeploymentArgs;
use git_xet_deployment::{Deployment, IndexLocation};
use git_xet_identity::auth::{self, Holder, Scope};
use git_xet_identity::rules::Rule;
use git_xet_index::TokenRecord;

#[derive(clap::Subcommand, Debug)]
pub(super) enum TokenCommand {
    /// Print a new access token for one or several repositories or whole organizations (no
    /// running server needed: the signing
    /// secret lives in the data directory) and record it (never its text) in the index. Use
    /// it as a Bearer token or as the HTTP Basic password (any user name) with git and git-lfs.
    Create(TokenCreateArgs),
    /// List the recorded tokens: id, user, rules (repositories and scopes), expiry (never the
    /// tokens).
    List(TokenListArgs),
    /// Revoke one token (and the transfer tokens minted from it) by id. Running servers
    /// refuse it within 5 seconds.
    Revoke(TokenRevokeArgs),
}

#[derive(clap::Args, Debug)]
pub(super) struct TokenCreateArgs {
    /// What the token covers, the rule language of `git xet shell --repo`: a repository
    /// (`name`, `org/name`) or every repository of an organization (`org/*`), optionally with
    /// its own scope (`org/*:read`). Repeat it for several (at most 16).
    #[arg(long, required = true)]
    repo: Vec<String>,
    /// The scope of each --repo that names none: `read` (clone, fetch, downloads), `write`
    /// (also push, uploads and locks) or `admin` (write, and force-unlocking other users'
    /// locks).
    #[arg(long, value_parser = ["read", "write", "admin"])]
    scope: String,
    /// The user the token acts as: owner of the locks it takes [default: the token's id].
    #[arg(long)]
    user: Option<String>,
    /// Lifetime in seconds (at least 1).
    #[arg(long, default_value_t = 30 * 24 * 3600,
          value_parser = clap::value_parser!(u64).range(1..))]
    ttl: u64,
    /// Where the server's secret lives: its data directory or, with a PostgreSQL index,
    /// the index (where the first server or command creates it).
    #[command(flatten)]
    deployment: DeploymentArgs,
    /// Create the data directory's signing secret if it has none (otherwise that is an
    /// error: a token signed with a new secret is refused by a server using another).
    #[arg(long)]
    init: bool,
}

#[derive(clap::Args, Debug)]
pub(super) struct TokenListArgs {
    #[command(flatten)]
    deployment: DeploymentArgs,
}

#[derive(clap::Args, Debug)]
pub(super) struct TokenRevokeArgs {
    /// The token's id, as `token list` shows it.
    id: String,
    #[command(flatten)]
    deployment: DeploymentArgs,
}

pub(super) fn run(command: TokenCommand) -> anyhow::Result<ExitCode> {
    match command {
        TokenCommand::Create(a) => token_create(a),
        TokenCommand::List(a) => token_list(a),
        TokenCommand::Revoke(a) => token_revoke(a),
    }
}

/// Opens the deployment. Without `init`, a data directory without a secret is an error (a
/// mistyped path must not get a new secret whose tokens no server accepts); with a PostgreSQL
/// index the secret lives in the index, where the first server or command creates it.
fn open(args: &DeploymentArgs, init: bool) -> anyhow::Result<Deployment> {
    let config = args.config()?;
    if matches!(config.index, IndexLocation::Sqlite(_)) {
        git_xet_deployment::open_keys(&config, init)?;
    }
    let staging = config.tmp_dir();
    std::fs::create_dir_all(&staging).with_context(|| format!("creating {}", staging.display()))?;
    Ok(git_xet_deployment::open(&config, &staging, true)?)
}

fn token_create(args: TokenCreateArgs) -> anyhow::Result<ExitCode> {
    let scope = Scope::parse(&args.scope).context("scope must be read, write or admin")?;
    let rules = args
        .repo
        .iter()
        .map(|spec| {
            Rule::parse(spec, scope, Scope::Admin).map_err(|e| anyhow::anyhow!("--repo {e}"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    if let Some(user) = &args.user {
        anyhow::ensure!(
            auth::valid_user(user),
            "--user must be 1 to {} characters without control characters",
            auth::MAX_USER_LEN
        );
    }
    let deployment = open(&args.deployment, args.init)?;
    let id = auth::new_token_id();
    let holder = Holder {
        user: args.user.unwrap_or_else(|| id.clone()),
        id,
    };
    let (token, exp) = auth::issue_rules(&deployment.keys, &rules, args.ttl, &holder)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    // One repository is recorded as before (`repo`, `scope`); several rules as their specs.
    let (repo, widest) = match rules.as_slice() {
        [rule] if rule.single_repo().is_some() => (
            rule.single_repo()
                .map(ToString::to_string)
                .unwrap_or_default(),
            rule.scope_granted(),
        ),
        _ => {
            let specs: Vec<String> = rules.iter().map(Rule::spec).collect();
            let widest = rules.iter().map(Rule::scope_granted).max().unwrap_or(scope);
            (specs.join(","), widest)
        }
    };
    deployment
        .index
        .record_token(&TokenRecord {
            id: holder.id,
            user: holder.user,
            repo,
            scope: widest.as_str().to_string(),
            created: git_xet_io::time::now_secs(),
            expires: exp,
            revoked: false,
        })
        .context("recording the token in the index")?;
    println!("{token}");
    Ok(ExitCode::SUCCESS)
}

fn token_list(args: TokenListArgs) -> anyhow::Result<ExitCode> {
    let deployment = open(&args.deployment, false)?;
    let tokens = deployment.index.tokens()?;
    print!("{}", table(&tokens, git_xet_io::time::now_secs()));
    Ok(ExitCode::SUCCESS)
}

fn token_revoke(args: TokenRevokeArgs) -> anyhow::Result<ExitCode> {
    let deployment = open(&args.deployment, false)?;
    if !deployment.index.revoke_token(&args.id)? {
        anyhow::bail!(
            "no token has the id {:?}; `git xet server token list` shows them",
            args.id
        );
    }
    let record = deployment
        .index
        .tokens()?
        .into_iter()
        .find(|t| t.id == args.id);
    let whose = record
        .map(|t| format!(" of {} ({})", t.user, rules_of(&t)))
        .unwrap_or_default();
    eprintln!(
        "revoked token {}{whose}; running servers refuse it within {} seconds",
        args.id,
        git_xet_identity::revocation::DEFAULT_TTL.as_secs()
    );
    Ok(ExitCode::SUCCESS)
}

/// What a record grants, as rules: a token of one repository is recorded as its name and
/// scope, one with several rules (or an ssh key's, `ssh:...`) as their specs.
fn rules_of(t: &TokenRecord) -> String {
    match t.repo.contains(':') {
        true => t.repo.clone(),
        false => format!("{}:{}", t.repo, t.scope),
    }
}

/// The `token list` table, columns padded to their widest cell.
fn table(tokens: &[TokenRecord], now: u64) -> String {
    let mut rows = vec![["ID", "USER", "RULES", "EXPIRES", "STATUS"].map(String::from)];
    for t in tokens {
        let status = if t.revoked {
            "revoked"
        } else if t.expires <= now {
            "expired"
        } else {
            "active"
        };
        rows.push([
            t.id.clone(),
            t.user.clone(),
            rules_of(t),
            git_xet_io::time::rfc3339(t.expires),
            status.to_string(),
        ]);
    }
    let widths: Vec<usize> = (0..5)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_shows_status_and_never_more_than_the_record() {
        let t = |id: &str, expires, revoked| TokenRecord {
            id: id.into(),
            user: "alice".into(),
            repo: "org/m".into(),
            scope: "write".into(),
            created: 0,
            expires,
            revoked,
        };
        let text = table(
            &[t("aa", 100, false), t("bb", 10, false), t("cc", 100, true)],
            50,
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(
            lines[0].starts_with("ID  USER   RULES        EXPIRES"),
            "{text}"
        );
        assert!(lines[1].starts_with("aa  alice  org/m:write  1970-01-01T00:01:40Z  active"));
        assert!(
            lines[2].ends_with("expired") && lines[3].ends_with("revoked"),
            "{text}"
        );
    }
}
