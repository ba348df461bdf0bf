//! `git xet pre-receive`: the check of hooks/pre-receive (see git_xet_hook).

use std::process::ExitCode;

use crate::common::logging;

use git_xet_hook::git::Git;
use git_xet_hook::{check, HookSettings};

/// `git xet pre-receive` reads its settings from GIT_XET_SERVER_URL, GIT_XET_REPO and
/// GIT_XET_TOKEN (set by `git xet server`), else from git config xet.serverUrl, xet.repo and
/// xet.token, as the hook shipped for other git servers does.
#[derive(clap::Args, Debug)]
pub struct PreReceiveArgs {}

/// Exits 1 with the reason on stderr (git shows it to the pusher) when the push must be
/// refused, including when the check itself cannot be made: the hook fails closed.
pub fn run(_args: PreReceiveArgs) -> anyhow::Result<ExitCode> {
    logging::init("warn");
    let git = Git::new();
    let verdict = HookSettings::load(&git)
        .and_then(|settings| Ok((check(std::io::stdin().lock(), &git, &settings)?, settings)));
    match verdict {
        Ok((verdict, settings)) => match verdict.message(&settings.repo) {
            Some(rejection) => {
                eprint!("{rejection}");
                Ok(ExitCode::FAILURE)
            }
            None => Ok(ExitCode::SUCCESS),
        },
        Err(e) => {
            eprintln!("git-xet pre-receive: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}
