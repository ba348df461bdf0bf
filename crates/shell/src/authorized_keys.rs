//! The authorized_keys line of a user: `command="<git-xet> shell --user NAME --data DIR
//! --repo ...",no-port-forwarding,no-X11-forwarding,no-agent-forwarding,no-pty <key>`.
//! Everything written is checked first, so a line can never grant more than it says (no
//! second option list smuggled in a comment, no quote closing the command early).

use std::io::Write;
use std::path::Path;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use crate::access::Grant;
use crate::ShellError;
use git_xet_deployment::IndexLocation;

const KEY_TYPES: &[&str] = &[
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
];
/// Longest public key accepted (an RSA 16384-bit key is about 2.8 kB of base64).
const MAX_KEY_LEN: usize = 8192;

/// A public key as in a `.pub` file: `<type> <base64> [comment]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    kind: String,
    blob: String,
    comment: Option<String>,
}

impl PublicKey {
    /// Checks the type, that the base64 decodes to a key blob of that same type, and that
    /// the comment is one line of printable text.
    pub fn parse(line: &str) -> Result<PublicKey, ShellError> {
        let bad = |why: &str| ShellError::BadSetting(format!("invalid public key: {why}"));
        let line = line.trim();
        if line.len() > MAX_KEY_LEN {
            return Err(bad("too long"));
        }
        if line.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
            return Err(bad("it must be one line (control characters found)"));
        }
        let mut fields = line.splitn(3, [' ', '\t']);
        let kind = fields.next().unwrap_or_default();
        if !KEY_TYPES.contains(&kind) {
            return Err(bad(&format!(
                "unknown key type {:?} (expected one of {}; paste the .pub file's line, without options)",
                kind.chars().take(40).collect::<String>(),
                KEY_TYPES.join(", ")
            )));
        }
        let blob = fields
            .next()
            .ok_or_else(|| bad("no key data after the type"))?;
        let bytes = STANDARD
            .decode(blob)
            .map_err(|_| bad("the key data is not base64"))?;
        // The blob starts with its own type as an ssh string (u32 length, bytes).
        let named = bytes
            .get(..4)
            .map(|l| u32::from_be_bytes([l[0], l[1], l[2], l[3]]) as usize)
            .and_then(|n| bytes.get(4..4usize.checked_add(n)?));
        if named != Some(kind.as_bytes()) {
            return Err(bad("the key data does not match its type"));
        }
        let comment = fields
            .next()
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_string);
        Ok(PublicKey {
            kind: kind.to_string(),
            blob: blob.to_string(),
            comment,
        })
    }
}

/// What goes into the forced command.
pub struct ShellCommand<'a> {
    /// The git-xet binary sshd runs.
    pub program: &'a Path,
    pub user: &'a str,
    pub data_dir: &'a Path,
    pub grants: &'a [Grant],
    pub public_url: Option<&'a str>,
    /// `--no-lfs-transfer`: LFS over git-lfs-authenticate and HTTP only.
    pub no_lfs_transfer: bool,
    /// `--index`: the deployment's index, when the signing secret lives there.
    pub index: Option<&'a IndexLocation>,
    /// `--token-id`: the id of the key's token record, carried by every token minted for it.
    pub token_id: Option<&'a str>,
}

/// Why an index URL with a password is refused, and what to do instead.
const INDEX_PASSWORD: &str = "the --index URL holds a password, which must not be written into \
     authorized_keys (the forced command's arguments are visible to every local user through \
     ps). Either give a URL without a password that PostgreSQL accepts for the account sshd \
     runs the shell as (peer authentication over the local socket, e.g. \
     postgres://git@%2Fvar%2Frun%2Fpostgresql/xet, or a pg_hba.conf rule for that host), or \
     leave --index out here and set the URL in sshd's environment for that account \
     (sshd_config: `Match User git` then `SetEnv GIT_XET_SERVER_INDEX=postgres://...`, in a \
     file only root can read); see docs/server.md, \"ssh with a PostgreSQL index\"";

/// One word for sh, refusing what cannot sit inside authorized_keys' `command="..."`.
fn word(s: &str, what: &str) -> Result<String, ShellError> {
    if s.is_empty() || s.chars().any(|c| c == '"' || c == '\\' || c.is_control()) {
        return Err(ShellError::BadSetting(format!(
            "{what} {s:?} cannot be written into authorized_keys (no quotes, backslashes or control characters)"
        )));
    }
    if s.bytes().all(|b| {
        b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'-' | b':' | b'@' | b'=')
    }) {
        return Ok(s.to_string());
    }
    Ok(format!("'{}'", s.replace('\'', "'\\''")))
}

/// The whole authorized_keys line (without its newline).
pub fn line(command: &ShellCommand<'_>, key: &PublicKey) -> Result<String, ShellError> {
    crate::access::check_user(command.user)?;
    let path = |p: &Path, what: &str| {
        let s = p.to_str().ok_or_else(|| {
            ShellError::BadSetting(format!("{what} {} is not UTF-8", p.display()))
        })?;
        if !p.is_absolute() {
            return Err(ShellError::BadSetting(format!(
                "{what} {s} must be an absolute path (sshd runs the command from the user's home)"
            )));
        }
        word(s, what)
    };
    let mut words = vec![
        path(command.program, "the git-xet program")?,
        "shell".to_string(),
        "--user".to_string(),
        word(command.user, "the user name")?,
        "--data".to_string(),
        path(command.data_dir, "the data directory")?,
    ];
    if let Some(url) = command.public_url {
        git_xet_deployment::running::check_url(url)
            .map_err(|e| ShellError::BadSetting(e.to_string()))?;
        words.push("--url".into());
        words.push(word(url, "the URL")?);
    }
    match command.index {
        // With SQLite the secret is in the data directory: nothing to add.
        None | Some(IndexLocation::Sqlite(_)) => {}
        Some(index @ IndexLocation::Postgres(url)) => {
            // The line is readable by the account, and the command line by every local
            // user (ps): a password goes into sshd's environment instead.
            let has_password = index
                .holds_password()
                .map_err(|e| ShellError::BadSetting(e.to_string()))?;
            if has_password {
                return Err(ShellError::BadSetting(INDEX_PASSWORD.into()));
            }
            words.push("--index".into());
            words.push(word(url, "the index")?);
        }
    }
    if command.no_lfs_transfer {
        words.push("--no-lfs-transfer".into());
    }
    if let Some(id) = command.token_id {
        words.push("--token-id".into());
        words.push(word(id, "the token id")?);
    }
    for grant in command.grants {
        words.push("--repo".into());
        words.push(word(&grant.spec(), "the grant")?);
    }
    let mut out = format!(
        "command=\"{}\",no-port-forwarding,no-X11-forwarding,no-agent-forwarding,no-pty {} {}",
        words.join(" "),
        key.kind,
        key.blob
    );
    if let Some(comment) = &key.comment {
        out.push(' ');
        out.push_str(comment);
    }
    Ok(out)
}

/// Appends `line` to the authorized_keys file `path` (created with mode 0600), on a line
/// of its own.
pub fn append(path: &Path, line: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let needs_newline = std::fs::read(path)
        .map(|b| !b.is_empty() && !b.ends_with(b"\n"))
        .unwrap_or(false);
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)?;
    let mut text = String::new();
    if needs_newline {
        text.push('\n');
    }
    text.push_str(line);
    text.push('\n');
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_xet_identity::auth::Scope;

    const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIO64O9Iq6vaFV1fGGgFEgWul2qiXXeZcr3hGWJjfmnb0 alice@laptop";

    #[test]
    fn key_lines_are_checked() {
        let key = PublicKey::parse(KEY).unwrap();
        assert_eq!(key.comment.as_deref(), Some("alice@laptop"));
        for bad in [
            "",
            "ssh-ed25519",
            "ssh-dss AAAA",
            "command=\"sh\" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIO64O9Iq6vaFV1fGGgFEgWul2qiXXeZcr3hGWJjfmnb0",
            "ssh-ed25519 !!!",
            // an RSA blob under the ed25519 type
            "ssh-ed25519 AAAAB3NzaC1yc2EAAAADAQABAAABAQ",
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIO64O9Iq6vaFV1fGGgFEgWul2qiXXeZcr3hGWJjfmnb0 x\nssh-rsa AAAA",
        ] {
            assert!(PublicKey::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_line_forces_the_shell_with_the_grants() {
        let key = PublicKey::parse(KEY).unwrap();
        let grants = [
            crate::access::parse_grant("org/m:write", Scope::Read).unwrap(),
            crate::access::parse_grant("team/*", Scope::Read).unwrap(),
        ];
        let cmd = ShellCommand {
            program: Path::new("/usr/bin/git-xet"),
            user: "alice",
            data_dir: Path::new("/srv/xet data"),
            grants: &grants,
            public_url: Some("https://xet.example"),
            no_lfs_transfer: false,
            index: None,
            token_id: Some("0123456789abcdef"),
        };
        assert_eq!(
            line(&cmd, &key).unwrap(),
            "command=\"/usr/bin/git-xet shell --user alice --data '/srv/xet data' --url https://xet.example \
             --token-id 0123456789abcdef --repo org/m:write --repo 'team/*:read'\",no-port-forwarding,no-X11-forwarding,\
             no-agent-forwarding,no-pty ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIO64O9Iq6vaFV1fGGgFEgWul2qiXXeZcr3hGWJjfmnb0 alice@laptop"
        );
        let quoted = ShellCommand {
            data_dir: Path::new("/srv/\"x"),
            ..cmd
        };
        assert!(line(&quoted, &key).is_err());
        let relative = ShellCommand {
            data_dir: Path::new("data"),
            ..quoted
        };
        assert!(line(&relative, &key).is_err());
    }

    #[test]
    fn an_index_url_goes_in_without_a_password_only() {
        let key = PublicKey::parse(KEY).unwrap();
        let grants = [crate::access::parse_grant("org/m:write", Scope::Read).unwrap()];
        let pg = IndexLocation::parse("postgres://git@db:5432/xet?sslmode=disable").unwrap();
        let cmd = ShellCommand {
            program: Path::new("/usr/bin/git-xet"),
            user: "alice",
            data_dir: Path::new("/srv/xet"),
            grants: &grants,
            public_url: None,
            no_lfs_transfer: false,
            index: Some(&pg),
            token_id: None,
        };
        assert!(line(&cmd, &key).unwrap().starts_with(
            "command=\"/usr/bin/git-xet shell --user alice --data /srv/xet \
             --index 'postgres://git@db:5432/xet?sslmode=disable' --repo org/m:write\","
        ));
        for secret in [
            "postgres://git:s3cret@db/xet",
            "postgres://git@db/xet?password=s3cret",
        ] {
            let index = IndexLocation::parse(secret).unwrap();
            let err = line(
                &ShellCommand {
                    index: Some(&index),
                    ..cmd
                },
                &key,
            )
            .unwrap_err()
            .to_string();
            assert!(!err.contains("s3cret"), "{err}");
            assert!(err.contains("SetEnv GIT_XET_SERVER_INDEX"), "{err}");
        }
    }

    #[test]
    fn appending_keeps_lines_apart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("authorized_keys");
        std::fs::write(&path, "ssh-ed25519 AAAA old").unwrap();
        append(&path, "new line").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "ssh-ed25519 AAAA old\nnew line\n"
        );
    }
}
