//! The tree listing one page at a time, as the Hub serves it: at most [`PAGE_SIZE`] entries
//! per answer and a `Link: <...>; rel="next"` header to the next page, which
//! `huggingface_hub` follows. The next page is of the same commit (its URL names the commit
//! id, not the branch) and starts after a cursor: the last entry's place in git's tree
//! order, which `ls-tree` lists in. `ls-tree` is read as it streams and stopped after the
//! page, so no answer holds more than a page, whatever the size of the tree; only the page's
//! blobs are then sized and read for LFS pointers.

use std::process::Stdio;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::error::{ServerError, ServerResult};
use crate::git::ls_tree;
use crate::hub::gitread::{self, Entry};
use crate::hub::HubResult;

/// Entries per page (the Hub's for its tree listing).
pub const PAGE_SIZE: usize = 1000;

/// One page of a listing and, when entries follow, the cursor of the next.
pub struct Page {
    pub entries: Vec<Entry>,
    pub next: Option<Cursor>,
}

/// Where a page starts: after the entry whose order key (see [`order_key`]) it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor(String);

impl Cursor {
    /// The cursor as the `cursor` query parameter carries it.
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.0.as_bytes())
    }

    /// The cursor of a `cursor` query parameter; a 400 for one this server did not make.
    pub fn decode(text: &str) -> HubResult<Cursor> {
        URL_SAFE_NO_PAD
            .decode(text)
            .ok()
            .filter(|bytes| bytes.len() <= 8192)
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .map(Cursor)
            .ok_or_else(|| {
                ServerError::bad_request(
                    "invalid cursor: follow the Link header of the previous page",
                )
                .into()
            })
    }
}

/// An entry's place in git's tree order: trees sort as if their name ended with `/`, so
/// that comparing these keys byte by byte orders a recursive listing (a directory just
/// before what it holds) as `ls-tree -r -t` does.
fn order_key(e: &Entry) -> String {
    match e.is_dir {
        true => format!("{}/", e.path),
        false => e.path.clone(),
    }
}

/// The page of `commit`'s tree under `prefix` ("" for the root; recursive or its direct
/// children) that starts after `after`, with the sizes and pointers of its files.
pub async fn page(
    dir: &std::path::Path,
    commit: &str,
    prefix: &str,
    recursive: bool,
    after: Option<&Cursor>,
) -> ServerResult<Page> {
    let treeish = match prefix {
        "" => format!("{commit}^{{tree}}"),
        _ => format!("{commit}:{prefix}"),
    };
    let mut cmd = gitread::git(dir);
    cmd.args(["ls-tree", "-z"]);
    if recursive {
        cmd.args(["-r", "-t"]);
    }
    cmd.arg(&treeish)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd
        .spawn()
        .map_err(|e| ServerError::internal(format!("running git: {e}")))?;
    let mut out = BufReader::new(child.stdout.take().expect("piped"));
    let mut entries = Vec::new();
    let mut more = false;
    let mut record = Vec::new();
    loop {
        record.clear();
        if out.read_until(0, &mut record).await? == 0 {
            break;
        }
        let Some(mut entry) = entry_of(&record) else {
            continue;
        };
        if !prefix.is_empty() {
            entry.path = format!("{prefix}/{}", entry.path);
        }
        if after.is_some_and(|after| order_key(&entry) <= after.0) {
            continue;
        }
        if entries.len() == PAGE_SIZE {
            more = true;
            break;
        }
        entries.push(entry);
    }
    drop(out);
    if more {
        // The rest is not needed: stop git rather than read it.
        let _ = child.start_kill();
        let _ = child.wait().await;
    } else {
        let status = child.wait().await?;
        if !status.success() {
            return Err(ServerError::internal(format!(
                "git ls-tree {treeish} failed ({status})"
            )));
        }
    }
    gitread::size_blobs(dir, &mut entries).await?;
    gitread::read_pointers(dir, &mut entries).await?;
    let next = match more {
        true => entries.last().map(|e| Cursor(order_key(e))),
        false => None,
    };
    Ok(Page { entries, next })
}

/// The entry of one `ls-tree -z` record (without `-l`: its size is read later).
/// Submodules and paths that are not UTF-8 are left out, as in `gitread::list`.
fn entry_of(record: &[u8]) -> Option<Entry> {
    gitread::entry_of(&ls_tree::records(record).next()?, Some(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, is_dir: bool) -> Entry {
        Entry {
            path: path.into(),
            oid: String::new(),
            is_dir,
            size: 0,
            pointer: None,
        }
    }

    #[test]
    fn order_keys_sort_as_git_lists_a_recursive_tree() {
        // What `ls-tree -r -t` prints for a.txt, a/b, a-c, a/d/e, ab: trees as `name/`.
        let listed = [
            entry("a-c", false),
            entry("a.txt", false),
            entry("a", true),
            entry("a/b", false),
            entry("a/d", true),
            entry("a/d/e", false),
            entry("ab", false),
        ];
        let keys: Vec<String> = listed.iter().map(order_key).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
    }

    #[test]
    fn cursors_round_trip_and_junk_is_refused() {
        let c = Cursor("dir/a b\u{e9}.txt".into());
        assert_eq!(Cursor::decode(&c.encode()).unwrap(), c);
        for bad in ["!!", "%%", &"A".repeat(20_000)] {
            assert!(Cursor::decode(bad).is_err(), "{bad}");
        }
    }
}
