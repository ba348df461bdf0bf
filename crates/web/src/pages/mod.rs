//! One module per kind of page; each takes its model (model.rs) and returns the whole
//! document. Everything a user wrote reaches the page through maud's `(...)`, which escapes.

pub mod file;
pub mod history;
pub mod listing;
pub mod problem;
pub mod repo;
pub mod status;

use maud::{html, Markup};

use crate::format::{human_bytes, rfc3339, utc};
use crate::model::{CommitSummary, EntryKind};
use crate::urls;

/// A time for people, with the exact instant for machines.
pub(crate) fn when(secs: i64) -> Markup {
    html! { time datetime=(rfc3339(secs)) { (utc(secs)) } }
}

/// A size with its exact byte count in `data-bytes`.
pub(crate) fn size(bytes: u64) -> Markup {
    html! { span.size data-bytes=(bytes) title={ (bytes) " bytes" } { (human_bytes(bytes)) } }
}

/// The storage badge of a tree entry.
pub(crate) fn storage_badge(kind: &EntryKind) -> Markup {
    html! {
        @match kind {
            EntryKind::Lfs { xet: true, .. } => {
                span.badge.lfs { "LFS" } " " span.badge.xet title="stored in chunks on this server" { "XET" }
            }
            EntryKind::Lfs { xet: false, .. } => {
                span.badge.lfs { "LFS" } " " span.badge.missing title="the object is not on this server" { "not stored" }
            }
            EntryKind::File { .. } => { span.muted { "git" } }
            EntryKind::Symlink => { span.muted { "symlink" } }
            EntryKind::Submodule => { span.muted { "submodule" } }
            EntryKind::Dir => {}
        }
    }
}

/// One line about a commit: subject (linked), author, time.
pub(crate) fn commit_line(repo: &str, c: &CommitSummary) -> Markup {
    html! {
        a href=(urls::commit(repo, &c.sha)) { (c.subject) }
        " " span.muted { "by " (c.author) ", " (when(c.time)) " · " }
        code { (crate::format::short(&c.sha)) }
    }
}
