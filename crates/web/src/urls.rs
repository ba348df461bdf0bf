//! The pages' URLs, built in one place: revisions and paths come from repositories (any
//! UTF-8 a file name may hold), so each is percent-encoded as a URL segment here and nowhere
//! else; route.rs reads them back.

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// Everything but RFC 3986's unreserved characters is escaped (a revision's `/` too: a
/// revision is one segment, as on the Hub).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// One URL segment.
pub fn segment(s: &str) -> String {
    utf8_percent_encode(s, SEGMENT).to_string()
}

/// A `/`-separated path in a repository, each segment escaped.
pub fn path(p: &str) -> String {
    p.split('/').map(segment).collect::<Vec<_>>().join("/")
}

/// `/{repo}` (repository names are `[A-Za-z0-9._-]` segments: nothing to escape).
pub fn repo(repo: &str) -> String {
    format!("/{repo}")
}

/// A directory at a revision (`path` empty: the root).
pub fn tree(repo: &str, rev: &str, dir: &str) -> String {
    match dir {
        "" => format!("/{repo}/tree/{}", segment(rev)),
        _ => format!("/{repo}/tree/{}/{}", segment(rev), path(dir)),
    }
}

/// A file's page at a revision.
pub fn blob(repo: &str, rev: &str, file: &str) -> String {
    format!("/{repo}/blob/{}/{}", segment(rev), path(file))
}

/// A file's bytes (the Hub's `resolve` route: ranges served, LFS files through XET).
pub fn resolve(repo: &str, rev: &str, file: &str) -> String {
    format!("/{repo}/resolve/{}/{}", segment(rev), path(file))
}

/// The commits of a revision, or of one file at it.
pub fn commits(repo: &str, rev: &str, file: Option<&str>) -> String {
    match file {
        Some(f) => format!("/{repo}/commits/{}/{}", segment(rev), path(f)),
        None => format!("/{repo}/commits/{}", segment(rev)),
    }
}

/// One commit.
pub fn commit(repo: &str, sha: &str) -> String {
    format!("/{repo}/commit/{}", segment(sha))
}

/// The repository's storage status: LFS files at the default branch, pushes, locks.
pub fn status(repo: &str) -> String {
    format!("/{repo}/status")
}

/// `base` with `?page=N` (page 0 is `base` itself).
pub fn page(base: &str, page: usize) -> String {
    match page {
        0 => base.to_string(),
        n => format!("{base}?page={n}"),
    }
}

/// The sign-in form, returning to `next` afterwards.
pub fn sign_in(next: &str) -> String {
    format!("{SIGN_IN}?next={}", segment(next))
}

/// Where the sign-in form is shown and posted.
pub const SIGN_IN: &str = "/-/sign-in";
/// Where signing out is posted.
pub const SIGN_OUT: &str = "/-/sign-out";
/// The style sheet every page links.
pub const STYLE: &str = "/-/web/style.css";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_and_paths_are_escaped_segment_by_segment() {
        assert_eq!(segment("feat/x"), "feat%2Fx");
        assert_eq!(path("a b/<c>&\"d\".bin"), "a%20b/%3Cc%3E%26%22d%22.bin");
        assert_eq!(tree("org/m", "main", ""), "/org/m/tree/main");
        assert_eq!(tree("org/m", "v1.0", "dir/sub"), "/org/m/tree/v1.0/dir/sub");
        assert_eq!(
            blob("datasets/o/d", "feat/x", "100%.txt"),
            "/datasets/o/d/blob/feat%2Fx/100%25.txt"
        );
        assert_eq!(
            resolve("o/m", "main", "a?b#c"),
            "/o/m/resolve/main/a%3Fb%23c"
        );
        assert_eq!(
            commits("o/m", "main", Some("x y")),
            "/o/m/commits/main/x%20y"
        );
        assert_eq!(page("/o/m/commits/main", 0), "/o/m/commits/main");
        assert_eq!(page("/o/m/commits/main", 2), "/o/m/commits/main?page=2");
        assert_eq!(sign_in("/o/m?x=1"), "/-/sign-in?next=%2Fo%2Fm%3Fx%3D1");
    }
}
