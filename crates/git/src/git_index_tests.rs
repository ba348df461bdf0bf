//! Index files written by real git, read back and compared with `git ls-files --stage`.

use super::*;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    out.stdout
}

fn repo(dir: &Path, format: &str) -> PathBuf {
    let top = dir.join("r");
    let top_str = top.to_str().unwrap();
    git(dir, &["init", "-q", "--object-format", format, top_str]);
    top
}

/// The index's entries as git lists them: path -> (stage, id).
fn listed(top: &Path) -> Vec<(Vec<u8>, u8, Vec<u8>)> {
    let out = git(top, &["ls-files", "--stage", "-z"]);
    out.split(|&b| b == 0)
        .filter(|l| !l.is_empty())
        .map(|line| {
            let tab = line.iter().position(|&b| b == b'\t').unwrap();
            let fields: Vec<&[u8]> = line[..tab].split(|&b| b == b' ').collect();
            let hex = std::str::from_utf8(fields[1]).unwrap();
            let id = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            (line[tab + 1..].to_vec(), fields[2][0] - b'0', id)
        })
        .collect()
}

/// Every path git lists has its stage-0 id, or `Conflicted` beside other stages.
fn assert_matches_git(top: &Path, format: ObjectFormat) -> IndexFile {
    let index = IndexFile::load(&top.join(".git/index"), format).unwrap();
    let listed = listed(top);
    assert!(!listed.is_empty());
    for (path, stage, id) in &listed {
        let conflicted = listed.iter().any(|(p, s, _)| p == path && *s != 0);
        let want = match (stage, conflicted) {
            (0, false) => Entry::Blob(id.clone()),
            _ => Entry::Conflicted,
        };
        assert_eq!(index.get(path), Some(&want), "{}", path.escape_ascii());
    }
    let mut paths: Vec<_> = listed.iter().map(|l| &l.0).collect();
    paths.dedup();
    assert_eq!(index.paths(), paths.len());
    index
}

/// Entries of awkward names added without files: a Latin-1 name, a path longer than the
/// 12-bit length field, and a conflict of three stages.
fn add_entries(top: &Path) {
    std::fs::write(top.join("plain.txt"), "plain\n").unwrap();
    let latin1 = std::ffi::OsStr::from_bytes(b"caf\xe9.bin");
    std::fs::write(top.join(latin1), "latin-1\n").unwrap();
    git(top, &["add", "."]);
    let blob = String::from_utf8(git(top, &["hash-object", "-w", "plain.txt"])).unwrap();
    let blob = blob.trim();
    let long: String = (0..25).map(|i| format!("{i:0>190}/")).collect::<String>() + "leaf";
    assert!(long.len() > 0xfff);
    let info = format!(
        "100644 {blob} 0\t{long}\n100644 {blob} 1\tboth.txt\n100644 {blob} 2\tboth.txt\n\
         100644 {blob} 3\tboth.txt\n"
    );
    let mut child = Command::new("git")
        .current_dir(top)
        .args(["update-index", "--index-info"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(info.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
}

#[test]
fn versions_2_3_and_4_read_as_git_lists_them() {
    for format in ["sha1", "sha256"] {
        let dir = tempfile::tempdir().unwrap();
        let top = repo(dir.path(), format);
        let kind = ObjectFormat::from_config(Some(format)).unwrap();
        add_entries(&top);
        let index = assert_matches_git(&top, kind);
        assert_eq!(index.get(b"both.txt"), Some(&Entry::Conflicted));
        assert_eq!(index.get(b"absent"), None);
        assert_eq!(
            &std::fs::read(top.join(".git/index")).unwrap()[4..8],
            [0, 0, 0, 2]
        );

        // Version 3: extended flags (skip-worktree, intent-to-add).
        std::fs::write(top.join("new.txt"), "new\n").unwrap();
        git(&top, &["add", "-N", "new.txt"]);
        git(&top, &["update-index", "--skip-worktree", "plain.txt"]);
        assert_eq!(
            &std::fs::read(top.join(".git/index")).unwrap()[4..8],
            [0, 0, 0, 3]
        );
        assert_matches_git(&top, kind);

        // Version 4: paths prefix-compressed.
        git(&top, &["update-index", "--index-version", "4"]);
        assert_eq!(
            &std::fs::read(top.join(".git/index")).unwrap()[4..8],
            [0, 0, 0, 4]
        );
        assert_matches_git(&top, kind);
    }
}

#[test]
fn a_blob_id_is_git_s() {
    for format in ["sha1", "sha256"] {
        let dir = tempfile::tempdir().unwrap();
        let top = repo(dir.path(), format);
        let kind = ObjectFormat::from_config(Some(format)).unwrap();
        for content in [
            &b""[..],
            b"version https://git-lfs.github.com/spec/v1\n",
            &[7; 300],
        ] {
            std::fs::write(top.join("f"), content).unwrap();
            let id = String::from_utf8(git(&top, &["hash-object", "f"])).unwrap();
            let ours: String = kind
                .blob_id(content)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(ours, id.trim());
        }
    }
    assert_eq!(
        ObjectFormat::from_config(Some("SHA256")),
        Some(ObjectFormat::Sha256)
    );
    assert_eq!(ObjectFormat::from_config(Some("md5")), None);
}

#[test]
fn damaged_and_unsupported_indexes_are_errors_never_answers() {
    let dir = tempfile::tempdir().unwrap();
    let top = repo(dir.path(), "sha1");
    add_entries(&top);
    for version in ["2", "4"] {
        git(&top, &["update-index", "--index-version", version]);
        let bytes = std::fs::read(top.join(".git/index")).unwrap();
        IndexFile::parse(&bytes, ObjectFormat::Sha1).unwrap();
        // Every truncation, and every flipped bit of a sample, is refused (no panic).
        for len in 0..bytes.len() {
            assert!(IndexFile::parse(&bytes[..len], ObjectFormat::Sha1).is_err());
        }
        for at in (0..bytes.len()).step_by(7) {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            assert!(IndexFile::parse(&bad, ObjectFormat::Sha1).is_err(), "{at}");
        }
        assert_eq!(
            IndexFile::parse(&bytes, ObjectFormat::Sha256).unwrap_err(),
            Unreadable::Checksum
        );
    }
    // Without a checksum (index.skipHash) nothing protects the body: bounds still hold.
    let mut bytes = std::fs::read(top.join(".git/index")).unwrap();
    let n = bytes.len();
    bytes[n - 20..].fill(0);
    IndexFile::parse(&bytes, ObjectFormat::Sha1).unwrap();
    for at in 12..n - 20 {
        for value in [0, 0x7f, 0xff] {
            let mut bad = bytes.clone();
            bad[at] = value;
            let _ = IndexFile::parse(&bad, ObjectFormat::Sha1);
        }
    }
    // A split index keeps its entries elsewhere: refused.
    git(&top, &["update-index", "--index-version", "2"]);
    git(&top, &["update-index", "--split-index"]);
    assert_eq!(
        IndexFile::load(&top.join(".git/index"), ObjectFormat::Sha1).unwrap_err(),
        Unreadable::Split
    );
    // Its entries that replace shared ones have no names: still refused as split.
    std::fs::write(top.join("plain.txt"), "changed\n").unwrap();
    git(&top, &["add", "plain.txt"]);
    assert_eq!(
        IndexFile::load(&top.join(".git/index"), ObjectFormat::Sha1).unwrap_err(),
        Unreadable::Split
    );
}
