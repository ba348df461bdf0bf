//! The man pages `git xet install` installs (so that `git xet --help` opens git-xet(1)) and
//! `git xet uninstall` removes again: user-level, and only where man already looks.
//!
//! Where the man path is known: the first of `BIN/../share/man`, for the directory BIN on
//! PATH that holds this git-xet (man-db and mandoc derive man directories from PATH that
//! way), and `$XDG_DATA_HOME/man` (`~/.local/share/man`), that `manpath` lists, i.e. that
//! `man` searches with the user's PATH and MANPATH. Elsewhere nothing is installed, and the
//! output says what to change. The installed files are recorded in the global git config
//! (`xet.install.manpage`), so uninstall removes exactly those.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use git_xet_git::config::{Config, Scope};

/// The global config key recording each installed page.
const RECORD: &str = "xet.install.manpage";

/// What installing the pages did, for the user.
pub enum Outcome {
    /// Pages written (or already identical) in `dir`.
    Installed {
        dir: PathBuf,
        written: usize,
        unchanged: usize,
    },
    /// No directory man searches: nothing installed; `hint` says how to make one.
    NoManPath { hint: String },
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Installed {
                dir,
                written,
                unchanged,
            } => write!(
                f,
                "man pages in {}: {written} installed, {unchanged} already up to date \
                 (`git xet --help` opens git-xet(1))",
                dir.display()
            ),
            Outcome::NoManPath { hint } => write!(f, "man pages not installed: {hint}"),
        }
    }
}

/// Installs both programs' man pages where man finds them, recording them in `config`'s
/// global scope. Idempotent.
pub fn install(config: &Config, exe: &Path) -> anyhow::Result<Outcome> {
    let Some(dir) = known_man_dir(exe) else {
        let bin = exe.parent().unwrap_or(Path::new("."));
        return Ok(Outcome::NoManPath {
            hint: format!(
                "man searches none of {}/../share/man or ~/.local/share/man (put {} on PATH, or \
                 one of them on MANPATH, and run `git xet install` again; `./install.sh \
                 --docs-only --prefix DIR` installs them anywhere)",
                bin.display(),
                bin.display()
            ),
        });
    };
    let generated = tempfile::tempdir().context("creating a temporary directory")?;
    let pages = super::docs::write_all_man_pages(generated.path())?;
    let man1 = dir.join("man1");
    std::fs::create_dir_all(&man1).with_context(|| format!("creating {}", man1.display()))?;
    let recorded = config.get_all(Some(Scope::Global), RECORD)?;
    let (mut written, mut unchanged) = (0, 0);
    for page in pages {
        let name = page.file_name().context("a page has a file name")?;
        let target = man1.join(name);
        let text = std::fs::read(&page).with_context(|| format!("reading {}", page.display()))?;
        if std::fs::read(&target).is_ok_and(|old| old == text) {
            unchanged += 1;
        } else {
            std::fs::write(&target, &text)
                .with_context(|| format!("writing {}", target.display()))?;
            written += 1;
        }
        let shown = target.display().to_string();
        if !recorded.contains(&shown) {
            config.add(Scope::Global, RECORD, &shown)?;
        }
    }
    Ok(Outcome::Installed {
        dir,
        written,
        unchanged,
    })
}

/// Removes the pages install recorded; returns how many files it removed.
pub fn uninstall(config: &Config) -> anyhow::Result<usize> {
    let recorded = config.get_all(Some(Scope::Global), RECORD)?;
    let mut removed = 0;
    for page in &recorded {
        let page = Path::new(page);
        // Only pages of ours, whatever the record says.
        let ours = page.extension() == Some(OsStr::new("1"))
            && page
                .file_name()
                .and_then(OsStr::to_str)
                .is_some_and(|n| n.starts_with("git-xet"));
        if ours && std::fs::remove_file(page).is_ok() {
            removed += 1;
        }
    }
    if !recorded.is_empty() {
        config.unset_all(Scope::Global, RECORD)?;
    }
    Ok(removed)
}

/// The first candidate directory that `manpath` lists (created for the question when
/// missing, and removed again when man would not search it); none without `manpath`.
fn known_man_dir(exe: &Path) -> Option<PathBuf> {
    candidates(exe).into_iter().find(|dir| {
        // The topmost directory this call creates, to take away again if man would not look.
        let created = dir.ancestors().take_while(|d| !d.exists()).last();
        let created = created.filter(|_| std::fs::create_dir_all(dir).is_ok());
        // Asked after creating it: man lists only directories that exist.
        let listed = manpath().unwrap_or_default();
        let known = dir.canonicalize().is_ok_and(|d| {
            listed
                .iter()
                .any(|l| l.canonicalize().is_ok_and(|l| l == d))
        });
        if let (Some(top), false) = (created, known) {
            let _ = std::fs::remove_dir_all(top);
        }
        known
    })
}

/// `manpath`'s answer (man-db and mandoc have it): the directories man searches.
fn manpath() -> Option<Vec<PathBuf>> {
    let out = std::process::Command::new("manpath")
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    Some(std::env::split_paths(text.trim()).collect())
}

/// `BIN/../share/man` for each PATH directory BIN holding this program, then the user's
/// data directory's `man`.
fn candidates(exe: &Path) -> Vec<PathBuf> {
    let exe = exe.canonicalize().unwrap_or_else(|_| exe.to_path_buf());
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut out: Vec<PathBuf> = std::env::split_paths(&path)
        .filter(|bin| {
            bin.join("git-xet")
                .canonicalize()
                .is_ok_and(|found| found == exe)
        })
        .filter_map(|bin| Some(bin.parent()?.join("share/man")))
        .collect();
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|d| Path::new(d).is_absolute())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".local/share")));
    out.extend(data.map(|d| d.join("man")));
    out
}
