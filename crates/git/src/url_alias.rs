//! `url.<base>.insteadOf` / `url.<base>.pushInsteadOf`: URL aliases rewritten to their base
//! before an endpoint is derived, by git-lfs's rules. The longest matching alias wins; an
//! upload tries the `pushInsteadOf` aliases first and falls back to `insteadOf`; aliases
//! apply to every URL git-lfs reads an endpoint from (`lfs.url`, `lfs.pushurl`,
//! `remote.<name>.lfsurl`/`lfspushurl`, the remote's `url` and `pushurl`). An empty alias
//! never applies (git-lfs skips it). Of two bases naming the same alias, the first
//! configured wins, as in git (git-lfs picks one at random and warns).

use crate::config::Config;
use crate::GitError;

const PREFIX: &str = "url.";

/// The aliases of a configuration, in configuration order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UrlAliases {
    /// `(alias, base)` from `insteadOf`.
    fetch: Vec<(String, String)>,
    /// `(alias, base)` from `pushInsteadOf`.
    push: Vec<(String, String)>,
}

impl UrlAliases {
    /// The aliases among `key value` entries as git lists them (section and variable name
    /// lowercased, the base as written; other keys are ignored).
    pub fn from_entries<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> UrlAliases {
        let mut aliases = UrlAliases::default();
        for (key, value) in entries {
            let Some((base, name)) = key
                .strip_prefix(PREFIX)
                .and_then(|rest| rest.rsplit_once('.'))
            else {
                continue;
            };
            let list = match name {
                "insteadof" => &mut aliases.fetch,
                "pushinsteadof" => &mut aliases.push,
                _ => continue,
            };
            if !value.is_empty() && !list.iter().any(|(alias, _)| alias == value) {
                list.push((value.to_string(), base.to_string()));
            }
        }
        aliases
    }

    /// The aliases of `config` (the snapshot when it has one: no git process then).
    pub fn read(config: &Config) -> Result<UrlAliases, GitError> {
        let entries = config.with_prefix(PREFIX)?;
        Ok(UrlAliases::from_entries(
            entries.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        ))
    }

    /// `url` with its longest matching alias replaced by that alias's base; for `upload`,
    /// a `pushInsteadOf` alias first.
    pub fn rewrite(&self, url: &str, upload: bool) -> String {
        if upload {
            if let Some(rewritten) = rewrite_with(&self.push, url) {
                return rewritten;
            }
        }
        rewrite_with(&self.fetch, url).unwrap_or_else(|| url.to_string())
    }
}

/// `url` rewritten by the longest alias of `aliases` it starts with, if any.
fn rewrite_with(aliases: &[(String, String)], url: &str) -> Option<String> {
    let (alias, base) = aliases
        .iter()
        .filter(|(alias, _)| url.starts_with(alias.as_str()))
        // The first of equally long aliases (they are then equal: deduplicated above).
        .max_by_key(|(alias, _)| alias.len())?;
    Some(format!("{base}{}", &url[alias.len()..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aliases(entries: &[(&str, &str)]) -> UrlAliases {
        UrlAliases::from_entries(entries.iter().copied())
    }

    #[test]
    fn the_longest_alias_wins_and_uploads_try_push_aliases_first() {
        let a = aliases(&[
            ("url.https://example.com/.insteadof", "ex:"),
            ("url.ssh://git@example.com/.pushinsteadof", "ex:"),
            ("url.ssh://example.com/.insteadof", "exp:"),
            ("url.http://127.0.0.1:9/org/.insteadof", "ex:org/"),
            ("url.http://other/.insteadof", "e"),
        ]);
        let cases = [
            // (url, upload, expected)
            ("ex:a/r.git", false, "https://example.com/a/r.git"),
            ("ex:a/r.git", true, "ssh://git@example.com/a/r.git"),
            ("exp:a/r.git", false, "ssh://example.com/a/r.git"),
            // No push alias matches: insteadOf applies to an upload too.
            ("exp:a/r.git", true, "ssh://example.com/a/r.git"),
            // `ex:org/` is longer than `ex:` and than `e`.
            ("ex:org/r.git", false, "http://127.0.0.1:9/org/r.git"),
            // A push alias, even shorter, comes before any fetch alias.
            ("ex:org/r.git", true, "ssh://git@example.com/org/r.git"),
            ("elsewhere", false, "http://other/lsewhere"),
            ("https://unrelated/r.git", true, "https://unrelated/r.git"),
            // Aliases are prefixes, matched case-sensitively.
            ("EX:a", false, "EX:a"),
        ];
        for (url, upload, expected) in cases {
            assert_eq!(a.rewrite(url, upload), expected, "{url} upload={upload}");
        }
    }

    #[test]
    fn keys_are_read_as_git_lists_them() {
        let a = aliases(&[
            // A base may hold dots; only the last one ends it.
            ("url.http://h.example.org/a.b/.insteadof", "h:"),
            // An empty alias never applies.
            ("url.http://everything/.insteadof", ""),
            // Of two bases naming the same alias the first one stays.
            ("url.http://first/.insteadof", "dup:"),
            ("url.http://second/.insteadof", "dup:"),
            // Not aliases.
            ("url.http://x/.other", "h:"),
            ("remote.origin.url", "h:"),
            ("url.insteadof", "h:"),
        ]);
        assert_eq!(a.rewrite("h:r", false), "http://h.example.org/a.b/r");
        assert_eq!(a.rewrite("dup:r", false), "http://first/r");
        assert_eq!(a.rewrite("plain", false), "plain");
        assert_eq!(a.rewrite("plain", true), "plain");
        assert_eq!(a.fetch.len(), 2);
        assert!(a.push.is_empty());
    }

    #[test]
    fn no_aliases_change_nothing() {
        let a = UrlAliases::default();
        assert_eq!(a.rewrite("git@host:org/r.git", true), "git@host:org/r.git");
    }
}
