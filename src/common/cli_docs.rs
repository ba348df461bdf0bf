//! Man pages and shell completions of the two programs, generated from their clap
//! definitions by each program's hidden `generate-docs DIR` command (install.sh runs both),
//! and `--help` opening those pages the way git's own commands do.
//!
//! git turns `git xet --help` into `git help xet`, which opens the page `git-xet`; every other
//! command is named by its words (`git xet server token create` is `git-xet-server-token-create`).
//! `git-xet` writes the pages of its own commands, `git-xet-server` those of `server`, `shell`
//! and `pre-receive`, so each page comes from the definition that parses the command.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};

use clap::Command;
use clap_complete::Shell;

/// Writes `DIR/man1/<page>.1` for `root` (when `with_root`) and every visible command below
/// it, except the direct subcommands named in `skip` (the other program documents them).
pub fn write_man_pages(
    root: Command,
    with_root: bool,
    skip: &[&str],
    dir: &Path,
) -> io::Result<Vec<PathBuf>> {
    let man1 = dir.join("man1");
    fs::create_dir_all(&man1)?;
    let mut root = root.disable_help_subcommand(true);
    root.build();
    let mut written = Vec::new();
    if with_root {
        written.push(write_page(&root, &man1)?);
    }
    for sub in visible(&root).filter(|s| !skip.contains(&s.get_name())) {
        write_tree(sub, &man1, &mut written)?;
    }
    Ok(written)
}

fn write_tree(cmd: &Command, man1: &Path, written: &mut Vec<PathBuf>) -> io::Result<()> {
    written.push(write_page(cmd, man1)?);
    for sub in visible(cmd) {
        write_tree(sub, man1, written)?;
    }
    Ok(())
}

fn visible(cmd: &Command) -> impl Iterator<Item = &Command> {
    cmd.get_subcommands().filter(|s| !s.is_hide_set())
}

fn write_page(cmd: &Command, man1: &Path) -> io::Result<PathBuf> {
    clap_mangen::Man::new(cmd.clone())
        .source(format!("git-xet {}", env!("CARGO_PKG_VERSION")))
        .manual("git-xet Manual")
        .generate_to(man1)
}

/// Writes the completion scripts of the program `name` under `DIR/completions/`:
/// `bash/NAME`, `zsh/_NAME` and `fish/NAME.fish`, the names each shell looks up;
/// `bash_extra` is appended to the bash script.
pub fn write_completions(
    cmd: Command,
    name: &str,
    bash_extra: &str,
    dir: &Path,
) -> io::Result<Vec<PathBuf>> {
    // Named as the shell sees it (the definitions say `git xet` for the help texts).
    let mut cmd = cmd.bin_name(name);
    let mut written = Vec::new();
    for (shell, file) in [
        (Shell::Bash, format!("bash/{name}")),
        (Shell::Zsh, format!("zsh/_{name}")),
        (Shell::Fish, format!("fish/{name}.fish")),
    ] {
        let path = dir.join("completions").join(file);
        fs::create_dir_all(path.parent().expect("a file under completions/"))?;
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut cmd, name, &mut script);
        if shell == Shell::Bash {
            script = bash_fix_labels(&String::from_utf8_lossy(&script), name).into_bytes();
            script.extend_from_slice(bash_extra.as_bytes());
        }
        fs::write(&path, script)?;
        written.push(path);
    }
    Ok(written)
}

/// clap_complete 4.6 labels the subcommands' cases of a program whose name holds `-` with
/// each `-` made `__subcmd__` (`git__subcmd__xet__subcmd__chunk`), but the state it matches
/// them against with each `-` made `__` (`git__xet__subcmd__chunk`): no subcommand would
/// complete. The labels are made what the state says.
fn bash_fix_labels(script: &str, name: &str) -> String {
    script.replace(&name.replace('-', "__subcmd__"), &name.replace('-', "__"))
}

/// For `ARGS... --help` (the long form; `-h` stays clap's summary), shows the man page of
/// the command the words before it name, as git does, and returns its exit status; `None`
/// when there is no `--help`, a command on the way takes `--help` as an argument (the
/// forwarded ones), or the page is not installed: then clap prints its help as before.
/// `root_has_page`: whether `root` itself has a page (`git-xet-server`'s root does not).
// `root` is built only when `--help` is there: the agent and the filter start often.
pub fn show_man_page_for_help(
    root: impl FnOnce() -> Command,
    root_has_page: bool,
    args: &[OsString],
) -> Option<i32> {
    let help_at = args.iter().position(|a| a == "--help")?;
    if args[..help_at].iter().any(|a| a == "--") {
        return None;
    }
    let mut root = root().disable_help_subcommand(true);
    root.build();
    let mut cmd = &root;
    for word in &args[..help_at] {
        if let Some(sub) = word.to_str().and_then(|w| cmd.find_subcommand(w)) {
            cmd = sub;
        }
        if cmd.is_disable_help_flag_set() {
            return None;
        }
    }
    if !root_has_page && std::ptr::eq(cmd, &root) {
        return None;
    }
    let page = cmd.get_display_name().unwrap_or_else(|| cmd.get_name());
    // `man -w` finds the page without showing it: absent page or no man, clap's help.
    let found = Process::new("man")
        .args(["-w", page])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        return None;
    }
    let status = Process::new("man").arg(page).status().ok()?;
    Some(status.code().unwrap_or(1))
}
