//! History: a revision's commits, one commit's changes, and a file's versions with what
//! each LFS version cost the server (bytes new vs shared with older versions).

use maud::html;

use super::{size, when};
use crate::format::{percent, short};
use crate::layout::{breadcrumbs, page, pager, repo_chrome};
use crate::model::{ChangeKind, CommitPage, CommitsPage, HistoryPage, VersionState, Viewer};
use crate::svg::cost_bars;
use crate::urls;

pub fn commits(p: &CommitsPage, viewer: &Viewer) -> String {
    let repo = &p.chrome.repo.name;
    let base = urls::commits(repo, &p.chrome.rev, None);
    let body = html! {
        (repo_chrome(&p.chrome))
        h2 { "Commits on " code { (p.chrome.rev) } }
        ol.commits {
            @for c in &p.commits {
                li.commit {
                    a href=(urls::commit(repo, &c.sha)) { (c.subject) }
                    div.muted { (c.author) " committed " (when(c.time)) " · " code { (short(&c.sha)) }
                        " · " a href=(urls::tree(repo, &c.sha, "")) aria-label={ "Files at " (short(&c.sha)) } { "files" } }
                }
            }
        }
        @if p.commits.is_empty() { p.muted { "No commits." } }
        (pager(&base, &p.paging))
    };
    page(&format!("Commits · {repo}"), viewer, body)
}

pub fn commit(p: &CommitPage, viewer: &Viewer) -> String {
    let repo = &p.chrome.repo.name;
    let c = &p.commit;
    let body = html! {
        (repo_chrome(&p.chrome))
        h2.subject { (c.subject) }
        @if !p.body.trim().is_empty() { pre.message { (p.body.trim()) } }
        dl.facts {
            dt { "Commit" } dd { code.sha { (c.sha) } }
            dt { "Author" } dd { (c.author) }
            dt { "Date" } dd { (when(c.time)) }
            @for parent in &c.parents {
                dt { "Parent" } dd { a href=(urls::commit(repo, parent)) { code { (short(parent)) } } }
            }
        }
        p { a href=(urls::tree(repo, &c.sha, "")) { "Browse the files at this commit" } }
        h3 { (p.total_changes) " changed " @if p.total_changes == 1 { "file" } @else { "files" } }
        table.changes {
            caption.visually-hidden { "Changed files" }
            thead { tr { th scope="col" { "Change" } th scope="col" { "Path" } th.num scope="col" { "Before" } th.num scope="col" { "After" } } }
            tbody {
                @for ch in &p.changes {
                    tr.change data-kind=(kind(ch.kind)) {
                        td { (kind(ch.kind)) @if ch.lfs { " " span.badge.lfs { "LFS" } } }
                        td.path {
                            @if ch.kind == ChangeKind::Deleted { (ch.path) }
                            @else { a href=(urls::blob(repo, &c.sha, &ch.path)) { (ch.path) } }
                        }
                        td.num { @if let Some(n) = ch.old_size { (size(n)) } }
                        td.num { @if let Some(n) = ch.new_size { (size(n)) } }
                    }
                }
            }
        }
        @if p.changes.len() < p.total_changes {
            p.muted { "The first " (p.changes.len()) " are listed." }
        }
    };
    page(&format!("{} · {repo}", c.subject), viewer, body)
}

fn kind(kind: ChangeKind) -> &'static str {
    match kind {
        ChangeKind::Added => "added",
        ChangeKind::Modified => "modified",
        ChangeKind::Deleted => "deleted",
        ChangeKind::TypeChanged => "type changed",
    }
}

pub fn file_history(p: &HistoryPage, viewer: &Viewer) -> String {
    let repo = &p.chrome.repo.name;
    let rev = &p.chrome.rev;
    let base = urls::commits(repo, rev, Some(&p.path));
    // Oldest at the top of the chart, as the versions happened.
    let bars: Vec<_> = p
        .versions
        .iter()
        .rev()
        .filter_map(|v| match &v.state {
            VersionState::Lfs {
                cost: Some(cost), ..
            } => Some((short(&v.commit.sha).to_string(), *cost)),
            _ => None,
        })
        .collect();
    let body = html! {
        (repo_chrome(&p.chrome))
        (breadcrumbs(repo, rev, &p.path))
        h2 { "History of " code { (p.path) } }
        @if !bars.is_empty() {
            p { "Each LFS version's bytes: new on the server, or shared with older versions of this file "
                "(the chunks its reconstruction uses that an older version already used; each is compared "
                "with at least the " (p.lookback) " versions before it)." }
            (cost_bars(&format!("What each version of {} cost", p.path), &bars))
        }
        table.versions {
            caption.visually-hidden { "Versions, newest first" }
            thead { tr {
                th scope="col" { "Commit" } th scope="col" { "Date" } th.num scope="col" { "Size" }
                th.num scope="col" { "New" } th.num scope="col" { "Shared" } th scope="col" { "sha256" }
            } }
            tbody {
                @for v in &p.versions {
                    tr.version {
                        td { a href=(urls::commit(repo, &v.commit.sha)) { (v.commit.subject) } " " code { (short(&v.commit.sha)) } }
                        td { (when(v.commit.time)) }
                        @match &v.state {
                            VersionState::Plain { size: n } => {
                                td.num { (size(*n)) } td.num { span.muted { "git" } } td {} td {}
                            }
                            VersionState::Lfs { size: n, sha256, cost } => {
                                td.num { (size(*n)) }
                                @if let Some(cost) = cost {
                                    td.num.new data-bytes=(cost.new) { (size(cost.new)) " " span.muted { "(" (percent(cost.new, cost.total())) ")" } }
                                    td.num.shared data-bytes=(cost.shared) { (size(cost.shared)) }
                                } @else {
                                    td.num colspan="2" { span.muted { "not on this server" } }
                                }
                                td { code { (short(sha256)) } }
                            }
                            VersionState::Deleted => { td.num { "deleted" } td {} td {} td {} }
                        }
                    }
                }
            }
        }
        @if p.versions.is_empty() { p.muted { "No commit changed this path." } }
        (pager(&base, &p.paging))
    };
    page(&format!("History of {} · {repo}", p.path), viewer, body)
}
