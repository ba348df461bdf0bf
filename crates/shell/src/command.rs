//! What the ssh client asked for (`SSH_ORIGINAL_COMMAND`): one of four commands, each naming
//! a hosted repository. Everything else is refused before anything runs: no shell ever sees
//! the client's words.

use crate::ShellError;
use git_xet_index::RepoName;

/// Longest command line considered.
const MAX_COMMAND_LEN: usize = 4096;

/// The LFS operation of `git-lfs-authenticate` and `git-lfs-transfer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LfsOperation {
    Upload,
    Download,
}

impl LfsOperation {
    fn parse(word: &str) -> Option<LfsOperation> {
        match word {
            "upload" => Some(LfsOperation::Upload),
            "download" => Some(LfsOperation::Download),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LfsOperation::Upload => "upload",
            LfsOperation::Download => "download",
        }
    }

    /// The scope the operation needs.
    pub fn scope(self) -> git_xet_identity::auth::Scope {
        match self {
            LfsOperation::Upload => git_xet_identity::auth::Scope::Write,
            LfsOperation::Download => git_xet_identity::auth::Scope::Read,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SshCommand {
    UploadPack(RepoName),
    ReceivePack(RepoName),
    LfsAuthenticate(RepoName, LfsOperation),
    LfsTransfer(RepoName, LfsOperation),
}

impl SshCommand {
    /// Parses the client's command. Words are separated by spaces; a word may be wrapped
    /// in single quotes (as git sends the path) but may hold no quote, backslash or
    /// control character: a repository name never needs one.
    pub fn parse(line: &str) -> Result<SshCommand, ShellError> {
        let refuse = |why: &str| ShellError::Refused(format!("{why}: {:?}", truncate(line)));
        if line.len() > MAX_COMMAND_LEN {
            return Err(refuse("command too long"));
        }
        let mut words = Vec::new();
        for raw in line.split(' ').filter(|w| !w.is_empty()) {
            let word = raw
                .strip_prefix('\'')
                .and_then(|w| w.strip_suffix('\''))
                .unwrap_or(raw);
            if word
                .bytes()
                .any(|b| matches!(b, b'\'' | b'"' | b'\\' | b'`' | b'$') || b.is_ascii_control())
            {
                return Err(refuse("unsupported character in command"));
            }
            words.push(word);
        }
        let repo = |word: Option<&&str>| -> Result<RepoName, ShellError> {
            let path = word.ok_or_else(|| refuse("no repository named"))?;
            // ssh://host/org/repo.git sends `/org/repo.git`; host:org/repo.git sends it bare.
            let path = path.strip_prefix('/').unwrap_or(path);
            RepoName::parse(path).map_err(|e| ShellError::Refused(e.to_string()))
        };
        let operation = |word: Option<&&str>| {
            word.and_then(|w| LfsOperation::parse(w))
                .ok_or_else(|| refuse("the operation must be upload or download"))
        };
        let (command, args) = words.split_first().ok_or_else(|| refuse("empty command"))?;
        let parsed = match (*command, args.len()) {
            ("git-upload-pack", 1) => SshCommand::UploadPack(repo(args.first())?),
            ("git-receive-pack", 1) => SshCommand::ReceivePack(repo(args.first())?),
            ("git-lfs-authenticate", 2) => {
                SshCommand::LfsAuthenticate(repo(args.first())?, operation(args.get(1))?)
            }
            ("git-lfs-transfer", 2) => {
                SshCommand::LfsTransfer(repo(args.first())?, operation(args.get(1))?)
            }
            ("git-upload-pack" | "git-receive-pack", _) => {
                return Err(refuse("expected one repository path"))
            }
            ("git-lfs-authenticate" | "git-lfs-transfer", _) => {
                return Err(refuse("expected a repository path and upload or download"))
            }
            _ => {
                return Err(refuse(
                    "only git-upload-pack, git-receive-pack, git-lfs-authenticate and \
                     git-lfs-transfer are served here (no shell access)",
                ))
            }
        };
        Ok(parsed)
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(120).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(s: &str) -> RepoName {
        RepoName::parse(s).unwrap()
    }

    #[test]
    fn git_and_lfs_commands_are_recognised_in_the_forms_clients_send() {
        use LfsOperation::*;
        let cases = [
            (
                "git-upload-pack '/org/m.git'",
                SshCommand::UploadPack(repo("org/m")),
            ),
            (
                "git-upload-pack 'org/m.git'",
                SshCommand::UploadPack(repo("org/m")),
            ),
            (
                "git-receive-pack '/m.git'",
                SshCommand::ReceivePack(repo("m")),
            ),
            (
                "git-lfs-authenticate /org/m.git download",
                SshCommand::LfsAuthenticate(repo("org/m"), Download),
            ),
            (
                "git-lfs-transfer 'org/m' upload",
                SshCommand::LfsTransfer(repo("org/m"), Upload),
            ),
        ];
        for (line, want) in cases {
            assert_eq!(SshCommand::parse(line).unwrap(), want, "{line}");
        }
    }

    #[test]
    fn hostile_and_unknown_commands_are_refused() {
        for bad in [
            "",
            "sh",
            "bash -c id",
            "git-upload-pack",
            "git-upload-pack '/org/../x.git'",
            "git-upload-pack '../../etc'",
            "git-upload-pack '--upload-pack=touch /tmp/x'",
            "git-upload-pack --upload-pack=id",
            "git-upload-pack 'a'\\''b'",
            "git-upload-pack \"org/m\"",
            "git-upload-pack 'org/m' extra",
            "git-upload-pack 'org/m;id'",
            "git-upload-pack $(id)",
            "git-upload-pack 'org/m\n'",
            "git-upload-archive 'org/m'",
            "git-lfs-authenticate org/m delete",
            "git-lfs-authenticate org/m",
            "git-lfs-transfer -x download",
            "git-upload-pack '~alice/m'",
            "git-upload-pack '/a/b/c'",
        ] {
            assert!(
                matches!(SshCommand::parse(bad), Err(ShellError::Refused(_))),
                "{bad:?}"
            );
        }
        assert!(SshCommand::parse(&"x".repeat(5000)).is_err());
    }
}
