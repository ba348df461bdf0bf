//! A repository's storage tab: its usage and dedup ratio, the LFS files at the default
//! branch and whether this server holds each, recent pushes and the locks held.

use maud::{html, Markup};

use super::when;
use crate::format::{human_bytes, ratio, short};
use crate::layout::{page, repo_chrome};
use crate::model::{StatusPage, Usage, Viewer};
use crate::urls;

/// The usage list, `id` for tests and links.
pub fn usage_list(id: &str, usage: &Usage) -> Markup {
    html! {
        dl.usage id=(id) {
            dt { "Files registered" } dd.files data-value=(usage.files) { (usage.files) }
            dt { "Logical bytes" } dd.logical data-bytes=(usage.logical_bytes) {
                (human_bytes(usage.logical_bytes)) " " span.muted { "(" (usage.logical_bytes) " bytes)" } }
            dt { "Stored bytes" } dd.stored data-bytes=(usage.stored_bytes) {
                (human_bytes(usage.stored_bytes)) " "
                span.muted { "(" (usage.stored_bytes) " bytes in " (usage.xorbs) " xorbs)" } }
            dt { "Dedup ratio" } dd.ratio { (ratio(usage.logical_bytes, usage.stored_bytes)) }
        }
    }
}

pub fn render(p: &StatusPage, viewer: &Viewer) -> String {
    let repo = &p.chrome.repo.name;
    let head = p.chrome.default_branch.as_deref().unwrap_or(&p.chrome.rev);
    let body = html! {
        (repo_chrome(&p.chrome))
        h2 { "Storage" }
        (usage_list(&format!("usage-{repo}"), &p.usage))
        h2 { "LFS files at " code { (head) } ": "
            span.lfs-count data-value=(p.lfs_total) { (p.lfs_total) } ", "
            span.lfs-bytes data-bytes=(p.lfs_total_bytes) { (human_bytes(p.lfs_total_bytes)) } }
        @if p.lfs_files.is_empty() { p.muted { "None." } } @else {
            table.files {
                caption.visually-hidden { "LFS files" }
                thead { tr { th scope="col" { "Path" } th.num scope="col" { "Size" } th scope="col" { "sha256" } th scope="col" { "On this server" } } }
                tbody {
                    @for f in &p.lfs_files {
                        tr.lfs-file {
                            td.path { a href=(urls::blob(repo, head, &f.path)) { (f.path) } }
                            td.num.size data-bytes=(f.size) { (human_bytes(f.size)) }
                            td { code { (&f.sha256[..f.sha256.len().min(16)]) } }
                            td.stored { @if f.stored { "yes" } @else { "missing" } }
                        }
                    }
                }
            }
            @if p.lfs_total > p.lfs_files.len() { p.muted { "and " (p.lfs_total - p.lfs_files.len()) " more" } }
        }
        h2 { "Recent pushes" }
        @if p.pushes.is_empty() { p.muted { "None recorded." } } @else {
            table.pushes {
                caption.visually-hidden { "Recent pushes, newest first" }
                thead { tr { th scope="col" { "When" } th scope="col" { "Ref" } th scope="col" { "By" } th scope="col" { "Update" } } }
                tbody {
                    @for push in &p.pushes {
                        tr.push {
                            td { (when(push.time)) } td { (push.refname) } td { (push.who) }
                            td { code { (short(&push.old)) } " → " a href=(urls::commit(repo, &push.new)) { code { (short(&push.new)) } } }
                        }
                    }
                }
            }
        }
        h2 { "Locks" }
        @if p.locks.is_empty() { p.muted { "None held." } } @else {
            table.locks {
                caption.visually-hidden { "Locks held, by path" }
                thead { tr { th scope="col" { "Path" } th scope="col" { "Owner" } th scope="col" { "Since" } } }
                tbody {
                    @for lock in &p.locks {
                        tr.lock data-id=(lock.id) {
                            td.path { (lock.path) } td.owner { (lock.owner) }
                            td.since data-time=(lock.locked_at) { (crate::format::utc(i64::try_from(lock.locked_at).unwrap_or(i64::MAX))) }
                        }
                    }
                }
            }
            @if p.more_locks { p.muted { "Only the first " (p.locks.len()) " are listed; " code { "git lfs locks" } " lists all." } }
        }
    };
    page(&format!("Storage · {repo}"), viewer, body)
}
