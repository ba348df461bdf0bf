//! contrib/systemd: the unit file passes `systemd-analyze verify` and stays hardened
//! (`systemd-analyze security --offline`), where systemd-analyze is installed (always
//! under CI: .ci/deps/00-systemd.sh installs it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::git_xet_server_bin;

const UNIT: &str = "git-xet-server.service";
/// The exposure score `systemd-analyze security` gives the unit, at most (0 is the most
/// confined, 10 not at all; ours is 1.1: what remains is network access, which it needs).
const MAX_EXPOSURE: f64 = 2.0;

fn contrib() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/systemd")
}

fn systemd_analyze() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("systemd-analyze"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        let why = "systemd-analyze is not installed (.ci/deps/00-systemd.sh installs it)";
        assert!(std::env::var_os("CI").is_none(), "{why}");
        eprintln!("skipping: {why}");
    }
    found
}

/// The unit as shipped, in a directory of its own, with `ExecStart` pointing at the binary
/// under test (verify checks that the program exists), and `extra` lines added.
fn unit_copy(extra: &str) -> tempfile::TempDir {
    let text = std::fs::read_to_string(contrib().join(UNIT)).unwrap();
    let bin = git_xet_server_bin();
    let text = text.replace("/usr/local/bin/git-xet-server", bin.to_str().unwrap());
    let text = text.replace("[Service]\n", &format!("[Service]\n{extra}"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(UNIT), text).unwrap();
    dir
}

fn analyze(tool: &Path, dir: &Path, args: &[&str]) -> Output {
    Command::new(tool)
        .args(args)
        .arg(dir.join(UNIT))
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Everything `verify` said about the unit: it exits 0 on unknown keys and bad values,
/// only warning, so its words are what counts.
fn complaints(out: &Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines: Vec<&str> = text.lines().filter(|l| l.contains(UNIT)).collect();
    if !out.status.success() {
        lines.push("(exit status non-zero)");
    }
    lines.join("\n")
}

#[test]
fn the_systemd_unit_verifies_and_stays_hardened() {
    let Some(tool) = systemd_analyze() else {
        return;
    };
    let dir = unit_copy("");
    let out = analyze(&tool, dir.path(), &["verify"]);
    assert_eq!(complaints(&out), "", "systemd-analyze verify complained");

    // The check can fail: a misspelt key and a bad value are reported.
    let broken = unit_copy("ProtectSystem=strictest\nNoNewPrivilege=yes\n");
    let said = complaints(&analyze(&tool, broken.path(), &["verify"])).to_lowercase();
    assert!(
        said.contains("protect system") && said.contains("nonewprivilege"),
        "{said}"
    );

    let out = analyze(&tool, dir.path(), &["security", "--offline=yes"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let score: f64 = text
        .lines()
        .find_map(|l| {
            l.split_once("Overall exposure level for ")?
                .1
                .split_once(": ")?
                .1
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| {
            panic!(
                "no exposure level in:\n{text}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    eprintln!("systemd-analyze security: exposure {score}");
    assert!(score <= MAX_EXPOSURE, "exposure {score}:\n{text}");
    for confined in [
        "ProtectSystem=",
        "NoNewPrivileges=",
        "PrivateTmp=",
        "ProtectHome=",
    ] {
        assert!(
            text.lines()
                .any(|l| l.contains('✓') && l.contains(confined)),
            "{confined} not in force:\n{text}"
        );
    }
}

/// Each variable in the environment file example is one the server reads (an option's
/// `env = "GIT_XET_SERVER_..."` in its command line's source, or the logging and S3 ones).
#[test]
fn the_environment_file_names_only_variables_the_server_reads() {
    let example = std::fs::read_to_string(contrib().join("git-xet-server.env")).unwrap();
    let cli = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bin/git-xet-server");
    let source: String = ["run.rs", "deployment.rs"]
        .iter()
        .map(|f| std::fs::read_to_string(cli.join(f)).unwrap())
        .collect();
    let mut named = 0;
    for line in example.lines() {
        let line = line.trim_start_matches('#');
        let Some((name, _)) = line.split_once('=') else {
            continue;
        };
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
            continue;
        }
        named += 1;
        let known = source.contains(&format!("env = \"{name}\""))
            || name.starts_with("AWS_")
            || name == "GIT_XET_LOG_LEVEL";
        assert!(known, "{name} is not a variable the server reads");
    }
    assert!(named > 5, "{named} variables");
}
