//! `git xet generate-docs DIR` (hidden; install.sh runs it) and `--help` as a man page: see
//! crate::common::cli_docs. This program documents its own commands; `server`, `shell` and
//! `pre-receive` are documented by `git-xet-server generate-docs`, whose definitions parse them.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::common::cli_docs;
use anyhow::Context;
use clap::CommandFactory;

use super::Cli;

/// The commands `git-xet-server` serves (see forward.rs).
const FORWARDED: [&str; 3] = ["server", "shell", "pre-receive"];

#[derive(clap::Args, Debug)]
pub struct DocsArgs {
    /// Directory to write `man1/*.1` and `completions/{bash,zsh,fish}/` into.
    dir: PathBuf,
}

/// git's bash completion loads the script named `git-xet` for `git xet ...` and calls
/// `_git_xet`; the words from `xet` on are handed to the program's own completion, and
/// those of the forwarded commands to `git-xet-server`'s (loaded the same way).
const BASH_GIT_GLUE: &str = r#"
_git_xet() {
    local i=${__git_cmd_idx:-1}
    local COMP_WORDS=(git-xet "${words[@]:i+1}")
    local COMP_CWORD=$((cword - i))
    _git_xet_dispatch
}

_git_xet_direct() {
    _git_xet_dispatch
}

_git_xet_dispatch() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    case "${COMP_WORDS[1]}" in
        server|shell|pre-receive)
            if [ "$COMP_CWORD" -gt 1 ]; then
                declare -F _git__xet__server >/dev/null || _completion_loader git-xet-server 2>/dev/null
                if declare -F _git__xet__server >/dev/null; then
                    local COMP_WORDS=(git-xet-server "${COMP_WORDS[@]:1}")
                    _git__xet__server git-xet-server "$cur" "$prev"
                    return
                fi
            fi ;;
    esac
    _git__xet git-xet "$cur" "$prev"
}

complete -F _git_xet_direct -o nosort -o bashdefault -o default git-xet
"#;

/// Writes the pages of this program's commands and its completion scripts into DIR.
pub fn generate(args: DocsArgs) -> anyhow::Result<ExitCode> {
    let mut written = cli_docs::write_man_pages(Cli::command(), true, &FORWARDED, &args.dir)?;
    written.extend(cli_docs::write_completions(
        Cli::command(),
        "git-xet",
        BASH_GIT_GLUE,
        &args.dir,
    )?);
    for path in written {
        println!("{}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes the man pages of both programs into `DIR/man1` (`git-xet-server`'s when it is
/// installed) and returns them.
pub fn write_all_man_pages(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut pages = cli_docs::write_man_pages(Cli::command(), true, &FORWARDED, dir)?;
    if let Ok(server) = super::forward::server_program() {
        let out = std::process::Command::new(&server)
            .arg("generate-docs")
            .arg(dir)
            .output()
            .with_context(|| format!("running {}", server.display()))?;
        anyhow::ensure!(
            out.status.success(),
            "{} generate-docs failed: {}",
            server.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        let man1 = dir.join("man1");
        pages.extend(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(PathBuf::from)
                .filter(|p| p.parent() == Some(man1.as_path())),
        );
    }
    Ok(pages)
}

/// `git-xet ... --help` shows the command's man page when it is installed (`-h`: clap's summary).
pub fn help_as_man_page() -> Option<ExitCode> {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    let code = cli_docs::show_man_page_for_help(Cli::command, true, &args)?;
    Some(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}
