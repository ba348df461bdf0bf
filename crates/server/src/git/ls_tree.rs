//! `git ls-tree -z` output, as the Hub and the status page read hosted trees. Paths are
//! any bytes but NUL (tabs, newlines, non-UTF-8 included): each caller decides what it
//! does with a path that is not UTF-8.

/// One record: `<mode> SP <type> SP <oid>[ SP+ <size>] TAB <path>` (the size with `-l`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    pub mode: &'a str,
    /// `blob`, `tree` or `commit` (a submodule).
    pub kind: &'a str,
    pub oid: &'a str,
    /// The blob's size with `-l`; `None` without it, or for trees and submodules (`-`).
    pub size: Option<u64>,
    /// The path as git stores it (relative to the listed tree).
    pub path: &'a [u8],
}

/// The records of `out`, in order; anything that does not parse is left out.
pub fn records(out: &[u8]) -> impl Iterator<Item = Record<'_>> {
    out.split(|&b| b == 0).filter_map(record)
}

fn record(bytes: &[u8]) -> Option<Record<'_>> {
    // The metadata has no tab; the path may hold any number.
    let tab = bytes.iter().position(|&b| b == b'\t')?;
    let meta = std::str::from_utf8(&bytes[..tab]).ok()?;
    let mut fields = meta.split_whitespace();
    let (mode, kind, oid) = (fields.next()?, fields.next()?, fields.next()?);
    let size = match fields.next() {
        None | Some("-") => None,
        Some(size) => Some(size.parse().ok()?),
    };
    Some(Record {
        mode,
        kind,
        oid,
        size,
        path: &bytes[tab + 1..],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_parse_and_junk_is_skipped() {
        let out = b"100644 blob 0123456789012345678901234567890123456789     12\ta b.txt\0\
040000 tree 1111111111111111111111111111111111111111       -\tdir\0\
160000 commit 2222222222222222222222222222222222222222       -\tsub\0\
100644 blob 3333333333333333333333333333333333333333\tno-size\0\
100644 blob 4444444444444444444444444444444444444444  12x\tbad-size\0\
garbage\0\xff\xfe blob x\tbad-meta\0";
        let found: Vec<_> = records(out).collect();
        let summary: Vec<_> = found.iter().map(|r| (r.kind, r.size, r.path)).collect();
        assert_eq!(
            summary,
            [
                ("blob", Some(12), &b"a b.txt"[..]),
                ("tree", None, b"dir"),
                ("commit", None, b"sub"),
                ("blob", None, b"no-size"),
            ]
        );
        assert_eq!(found[0].mode, "100644");
        assert_eq!(found[0].oid, "0123456789012345678901234567890123456789");
    }

    /// Names with tabs, newlines and bytes that are not UTF-8, as real git lists them with
    /// `-z` (unquoted), come back byte for byte.
    #[test]
    fn hostile_names_from_real_git_come_back_byte_for_byte() {
        use std::io::Write;
        use std::os::unix::ffi::OsStrExt;
        use std::process::{Command, Stdio};

        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("r.git");
        let git = |args: &[&std::ffi::OsStr], input: &[u8]| {
            let mut child = Command::new("git")
                .arg("--git-dir")
                .arg(&repo)
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            child.stdin.take().unwrap().write_all(input).unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "git {args:?}: {out:?}");
            out.stdout
        };
        let os = |s: &str| std::ffi::OsStr::new(s).to_owned();
        git(&[&os("init"), &os("-q"), &os("--bare")], b"");
        let blob = git(
            &[&os("hash-object"), &os("-w"), &os("--stdin")],
            b"content\n",
        );
        let blob = String::from_utf8(blob).unwrap().trim().to_string();
        let names: [&[u8]; 5] = [
            b"tab\there",
            b"new\nline",
            b"\t\tlead\ttabs ",
            b"latin1-\xe9t\xe9",
            b"\xff\xfe\n\t",
        ];
        let mut listing = Vec::new();
        for name in names {
            listing.extend_from_slice(format!("100644 blob {blob}\t").as_bytes());
            listing.extend_from_slice(name);
            listing.push(0);
        }
        let tree = git(&[&os("mktree"), &os("-z")], &listing);
        let tree = std::ffi::OsStr::from_bytes(tree.trim_ascii()).to_owned();
        let out = git(&[&os("ls-tree"), &os("-l"), &os("-z"), &tree], b"");
        let mut found: Vec<_> = records(&out).collect();
        found.sort_by_key(|r| r.path);
        let mut expected = names.to_vec();
        expected.sort();
        assert_eq!(found.iter().map(|r| r.path).collect::<Vec<_>>(), expected);
        for r in &found {
            assert_eq!(
                (r.mode, r.kind, r.oid, r.size),
                ("100644", "blob", &*blob, Some(8))
            );
        }
    }
}
