//! The ssh command line for a remote command, built the way git-lfs builds it (its
//! `ssh/ssh.go`): the program from `GIT_SSH_COMMAND`, `GIT_SSH` or `core.sshCommand`, the
//! variant's port flag, `--` before a destination starting with `-`, and the remote command
//! as one argument; a command given as a shell string runs through `sh -c` with every
//! argument quoted.

use crate::ssh::url::SshRemote;

/// What decides the command: the environment and git config values git-lfs reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SshSettings {
    /// `GIT_SSH_COMMAND` (a shell command).
    pub git_ssh_command: Option<String>,
    /// `GIT_SSH` (a program, no arguments).
    pub git_ssh: Option<String>,
    /// `core.sshCommand` (a shell command).
    pub core_ssh_command: Option<String>,
    /// `GIT_SSH_VARIANT`, else `ssh.variant`.
    pub variant: Option<String>,
}

impl SshSettings {
    /// From this process's environment and the given config reader.
    pub fn from_env(config: impl Fn(&str) -> Option<String>) -> SshSettings {
        let env = |k: &str| std::env::var(k).ok();
        SshSettings {
            git_ssh_command: env("GIT_SSH_COMMAND"),
            git_ssh: env("GIT_SSH"),
            core_ssh_command: config("core.sshcommand"),
            variant: env("GIT_SSH_VARIANT").or_else(|| config("ssh.variant")),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    Ssh,
    Simple,
    Putty,
    Tortoise,
}

/// A program and its arguments, ready for `std::process::Command`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SshCommand {
    pub program: String,
    pub args: Vec<String>,
}

/// The command that runs `remote_command` (e.g. `git-lfs-authenticate org/r.git download`)
/// on `remote`.
pub fn build(settings: &SshSettings, remote: &SshRemote, remote_command: &str) -> SshCommand {
    let nonempty = |v: &Option<String>| v.clone().filter(|s| !s.is_empty());
    // A shell command wins over GIT_SSH; core.sshCommand only when neither is set.
    let mut ssh = nonempty(&settings.git_ssh).unwrap_or_default();
    let mut shell_cmd = None;
    if let Some(first) = nonempty(&settings.git_ssh_command)
        .as_deref()
        .and_then(first_field)
    {
        ssh = first;
        shell_cmd = settings.git_ssh_command.clone();
    }
    if ssh.is_empty() {
        ssh = "ssh".into();
        if let Some(first) = nonempty(&settings.core_ssh_command)
            .as_deref()
            .and_then(first_field)
        {
            ssh = first;
            shell_cmd = settings.core_ssh_command.clone();
        }
    }
    let base = ssh.rsplit(['/', '\\']).next().unwrap_or(&ssh).to_string();
    let variant = variant(settings.variant.as_deref(), &base);

    let mut args = Vec::new();
    if variant == Variant::Tortoise {
        args.push("-batch".to_string());
    }
    if let Some(port) = &remote.port {
        let flag = match variant {
            Variant::Putty | Variant::Tortoise => "-P",
            Variant::Ssh | Variant::Simple => "-p",
        };
        args.extend([flag.to_string(), port.clone()]);
    }
    if remote.user_and_host.starts_with('-') {
        if variant == Variant::Ssh {
            args.extend(["--".to_string(), remote.user_and_host.clone()]);
        } else {
            args.push(remote.user_and_host.trim_start_matches('-').to_string());
        }
    } else {
        args.push(remote.user_and_host.clone());
    }
    args.push(remote_command.to_string());

    match shell_cmd {
        Some(cmd) => {
            let quoted: Vec<String> = args.iter().map(|a| shell_quote(a)).collect();
            SshCommand {
                program: "sh".into(),
                args: vec!["-c".into(), format!("{cmd} {}", quoted.join(" "))],
            }
        }
        None => SshCommand { program: ssh, args },
    }
}

/// The ssh variant: `GIT_SSH_VARIANT`/`ssh.variant` when set to a known one (an unknown
/// value means plain ssh, `auto` means guess), else guessed from the program's name.
fn variant(configured: Option<&str>, base: &str) -> Variant {
    match configured {
        Some("ssh") => return Variant::Ssh,
        Some("simple") => return Variant::Simple,
        Some("putty") | Some("plink") => return Variant::Putty,
        Some("tortoiseplink") => return Variant::Tortoise,
        Some("auto") | None => {}
        Some(_) => return Variant::Ssh,
    }
    if base == "ssh" {
        return Variant::Ssh;
    }
    let stem = match base.rfind('.') {
        Some(i) if i > 0 => &base[..i],
        _ => base,
    };
    if stem.eq_ignore_ascii_case("plink") {
        Variant::Putty
    } else if stem.eq_ignore_ascii_case("tortoiseplink") {
        Variant::Tortoise
    } else {
        Variant::Ssh
    }
}

/// The program of a shell command: the first field, where a field in quotes runs to the
/// last matching quote (git-lfs's `tools.QuotedFields`).
fn first_field(command: &str) -> Option<String> {
    let s = command.trim_start();
    let quote = s.chars().next()?;
    if quote == '\'' || quote == '"' {
        let line = s.lines().next().unwrap_or(s);
        if let Some(end) = line[1..].rfind(quote) {
            return Some(line[1..1 + end].to_string());
        }
    }
    let field: String = s.chars().take_while(|c| !c.is_whitespace()).collect();
    (!field.is_empty()).then_some(field)
}

/// git-lfs's quoting for sh: words of `[A-Za-z0-9_@/.-]` as they are, anything else in
/// single quotes.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_@/.-".contains(&b));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(url: &str) -> SshRemote {
        SshRemote::parse(url).unwrap()
    }

    fn cmd(settings: &SshSettings, url: &str) -> (String, Vec<String>) {
        let c = build(
            settings,
            &remote(url),
            "git-lfs-authenticate org/r.git download",
        );
        (c.program, c.args)
    }

    fn strs(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn plain_ssh_with_and_without_a_port() {
        let s = SshSettings::default();
        assert_eq!(
            cmd(&s, "git@h:org/r.git"),
            (
                "ssh".into(),
                strs(&["git@h", "git-lfs-authenticate org/r.git download"])
            )
        );
        assert_eq!(
            cmd(&s, "ssh://git@h:2222/org/r.git").1,
            strs(&[
                "-p",
                "2222",
                "git@h",
                "git-lfs-authenticate org/r.git download"
            ])
        );
    }

    #[test]
    fn git_ssh_command_runs_through_sh_with_quoted_arguments() {
        let s = SshSettings {
            git_ssh_command: Some("ssh -i '/k ey' -o X=1".into()),
            git_ssh: Some("ignored-plink".into()),
            core_ssh_command: Some("also-ignored".into()),
            variant: None,
        };
        assert_eq!(
            cmd(&s, "ssh://git@h:2222/x"),
            (
                "sh".into(),
                strs(&[
                    "-c",
                    "ssh -i '/k ey' -o X=1 -p 2222 git@h 'git-lfs-authenticate org/r.git download'"
                ])
            )
        );
    }

    #[test]
    fn git_ssh_is_a_program_and_core_ssh_command_comes_last() {
        let s = SshSettings {
            git_ssh: Some("/usr/bin/plink.exe".into()),
            core_ssh_command: Some("ssh -v".into()),
            ..Default::default()
        };
        assert_eq!(
            cmd(&s, "ssh://h:2222/x"),
            (
                "/usr/bin/plink.exe".into(),
                strs(&["-P", "2222", "h", "git-lfs-authenticate org/r.git download"])
            )
        );
        let s = SshSettings {
            core_ssh_command: Some("\"/opt/my ssh/ssh\" -v".into()),
            ..Default::default()
        };
        let (program, args) = cmd(&s, "h:x");
        assert_eq!(program, "sh");
        assert_eq!(
            args[1],
            "\"/opt/my ssh/ssh\" -v h 'git-lfs-authenticate org/r.git download'"
        );
    }

    #[test]
    fn variants_and_their_port_flags() {
        let with = |git_ssh: &str, variant: Option<&str>| {
            let s = SshSettings {
                git_ssh: Some(git_ssh.into()),
                variant: variant.map(str::to_string),
                ..Default::default()
            };
            cmd(&s, "ssh://h:22/x").1[..3].join(" ")
        };
        assert_eq!(with("tortoiseplink", None), "-batch -P 22");
        assert_eq!(with("TortoisePlink.exe", None), "-batch -P 22");
        assert_eq!(with("plink", None), "-P 22 h");
        assert_eq!(with("myssh", Some("plink")), "-P 22 h");
        assert_eq!(with("plink", Some("ssh")), "-p 22 h");
        assert_eq!(with("plink", Some("bogus")), "-p 22 h");
        assert_eq!(with("plink", Some("auto")), "-P 22 h");
        assert_eq!(with("wrapper", Some("simple")), "-p 22 h");
    }

    #[test]
    fn a_destination_that_looks_like_an_option_is_not_one() {
        let s = SshSettings::default();
        assert_eq!(
            cmd(&s, "ssh://-oProxyCommand=x/r").1[..2],
            strs(&["--", "-oProxyCommand=x"])
        );
        let s = SshSettings {
            git_ssh: Some("plink".into()),
            ..Default::default()
        };
        assert_eq!(cmd(&s, "ssh://-oProxyCommand=x/r").1[0], "oProxyCommand=x");
    }

    #[test]
    fn quoting_matches_git_lfs() {
        assert_eq!(shell_quote("git@h.example-1/x_y"), "git@h.example-1/x_y");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("$(x)"), "'$(x)'");
        assert_eq!(first_field("  'a b' c 'd'"), Some("a b' c 'd".into()));
        assert_eq!(first_field("ssh -v"), Some("ssh".into()));
        assert_eq!(first_field("   "), None);
    }
}
