//! Which page a path under a repository names, the reverse of urls.rs: `/{repo}`,
//! `/{repo}/tree/{rev}[/{path}]`, `/{repo}/blob/{rev}/{path}`, `/{repo}/commits/{rev}[/{path}]`,
//! `/{repo}/commit/{sha}` and `/{repo}/status`. A repository is `org/name`, `name` or
//! `datasets/org/name`; the longest name whose remainder is a page wins, so `/a/tree/main`
//! is the tree of `a` while `/a/b` is the repository `a/b`. Segments are percent-decoded;
//! names and paths are only split here, the server checks them.

use percent_encoding::percent_decode_str;

/// A page of a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum View {
    /// The repository's front page (the default branch's root and README); for a
    /// one-segment name, possibly an organization's page instead (the server decides).
    Home,
    Tree {
        rev: String,
        path: String,
    },
    Blob {
        rev: String,
        path: String,
    },
    Commits {
        rev: String,
        path: Option<String>,
    },
    Commit {
        sha: String,
    },
    Status,
}

/// A repository name as written in the path (unchecked) and the page asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoRoute {
    pub repo: String,
    pub view: View,
}

/// Why a path names no page.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error("this path names no page of a repository")]
    NoPage,
    #[error("a URL segment is not valid percent-encoded UTF-8")]
    BadEscape,
}

/// Reads a request path (still percent-encoded, leading `/` optional).
pub fn parse(path: &str) -> Result<RepoRoute, RouteError> {
    let trimmed = path.trim_start_matches('/');
    let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
    if trimmed.is_empty() {
        return Err(RouteError::NoPage);
    }
    let segments: Vec<&str> = trimmed.split('/').collect();
    let lengths: &[usize] = match segments[0] {
        "datasets" => &[3, 2],
        _ => &[2, 1],
    };
    for &n in lengths {
        if segments.len() < n {
            continue;
        }
        if let Some(view) = view(&segments[n..])? {
            return Ok(RepoRoute {
                repo: segments[..n].join("/"),
                view,
            });
        }
    }
    Err(RouteError::NoPage)
}

fn view(rest: &[&str]) -> Result<Option<View>, RouteError> {
    let joined = |parts: &[&str]| -> Result<String, RouteError> {
        Ok(parts
            .iter()
            .map(|p| decode(p))
            .collect::<Result<Vec<_>, _>>()?
            .join("/"))
    };
    Ok(Some(match rest {
        [] => View::Home,
        ["status"] => View::Status,
        ["tree", rev, path @ ..] => View::Tree {
            rev: decode(rev)?,
            path: joined(path)?,
        },
        ["blob", rev, path @ ..] if !path.is_empty() => View::Blob {
            rev: decode(rev)?,
            path: joined(path)?,
        },
        ["commits", rev, path @ ..] => View::Commits {
            rev: decode(rev)?,
            path: match path {
                [] => None,
                _ => Some(joined(path)?),
            },
        },
        ["commit", sha] => View::Commit { sha: decode(sha)? },
        _ => return Ok(None),
    }))
}

fn decode(segment: &str) -> Result<String, RouteError> {
    percent_decode_str(segment)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| RouteError::BadEscape)
}

/// The page number of a query string's `page=N` (0 when absent or not a number).
pub fn page_number(query: Option<&str>) -> usize {
    query
        .unwrap_or("")
        .split('&')
        .find_map(|pair| pair.strip_prefix("page="))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// A query parameter's decoded value.
pub fn query_value(query: Option<&str>, key: &str) -> Option<String> {
    query?.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        let v = v.replace('+', " ");
        (k == key).then(|| {
            percent_decode_str(&v)
                .decode_utf8()
                .ok()
                .map(|s| s.into_owned())
        })?
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::urls;

    fn route(repo: &str, view: View) -> Result<RepoRoute, RouteError> {
        Ok(RepoRoute {
            repo: repo.into(),
            view,
        })
    }

    #[test]
    fn paths_name_their_pages() {
        let tree = |rev: &str, path: &str| View::Tree {
            rev: rev.into(),
            path: path.into(),
        };
        assert_eq!(parse("/org/m"), route("org/m", View::Home));
        assert_eq!(parse("/org/m/"), route("org/m", View::Home));
        assert_eq!(parse("/gpt2"), route("gpt2", View::Home));
        assert_eq!(parse("/org/m/tree/main"), route("org/m", tree("main", "")));
        assert_eq!(
            parse("/org/m/tree/feat%2Fx/a/b"),
            route("org/m", tree("feat/x", "a/b"))
        );
        assert_eq!(parse("/gpt2/tree/main"), route("gpt2", tree("main", "")));
        assert_eq!(parse("/org/tree"), route("org/tree", View::Home));
        assert_eq!(
            parse("/datasets/o/d/blob/main/x%20y.csv"),
            route(
                "datasets/o/d",
                View::Blob {
                    rev: "main".into(),
                    path: "x y.csv".into()
                }
            )
        );
        assert_eq!(parse("/datasets/o"), route("datasets/o", View::Home));
        assert_eq!(
            parse("/o/m/commits/main/w.bin"),
            route(
                "o/m",
                View::Commits {
                    rev: "main".into(),
                    path: Some("w.bin".into())
                }
            )
        );
        assert_eq!(
            parse("/o/m/commit/abc"),
            route("o/m", View::Commit { sha: "abc".into() })
        );
        assert_eq!(parse("/o/m/status"), route("o/m", View::Status));
        for none in [
            "",
            "/",
            "/o/m/blob/main",
            "/o/m/nothing",
            "/o/m/info/refs",
            "/a/b/c",
        ] {
            assert_eq!(parse(none), Err(RouteError::NoPage), "{none}");
        }
        assert_eq!(parse("/o/m/tree/%ff"), Err(RouteError::BadEscape));
    }

    #[test]
    fn built_urls_read_back() {
        let path = "dir/<x> & \"y\"/100%.bin";
        let rev = "feat/ü";
        let built = urls::blob("o/m", rev, path);
        assert_eq!(
            parse(&built),
            route(
                "o/m",
                View::Blob {
                    rev: rev.into(),
                    path: path.into()
                }
            )
        );
    }

    #[test]
    fn query_values_decode() {
        assert_eq!(page_number(Some("page=3")), 3);
        assert_eq!(page_number(Some("a=1&page=x")), 0);
        assert_eq!(page_number(None), 0);
        assert_eq!(
            query_value(Some("next=%2Fo%2Fm&x=1"), "next").as_deref(),
            Some("/o/m")
        );
        assert_eq!(
            query_value(Some("token=a+b"), "token").as_deref(),
            Some("a b")
        );
        assert_eq!(query_value(Some("x=%ff"), "x"), None);
    }
}
