//! A directory at a revision; at the root, the repository's front page with its README and
//! the commands to get it.

use maud::{html, Markup};

use super::{commit_line, size, storage_badge};
use crate::layout::{breadcrumbs, page, pager, repo_chrome};
use crate::model::{CloneInfo, EntryKind, LastCommit, ReadmeBody, RepoInfo, TreePage, Viewer};
use crate::urls;

/// What a large directory's first view says in place of its last commit.
pub const PENDING: &str =
    "still being looked up in this large directory's history; reload the page to see it.";

pub fn render(p: &TreePage, viewer: &Viewer) -> String {
    let repo = &p.chrome.repo.name;
    let rev = &p.chrome.rev;
    let title = match p.dir.as_str() {
        "" => repo.clone(),
        dir => format!("{dir} at {rev} · {repo}"),
    };
    let base = urls::tree(repo, rev, &p.dir);
    let body = html! {
        (repo_chrome(&p.chrome))
        @match &p.commit {
            Some(LastCommit::Known(c)) => {
                p.lastcommit { "Latest commit: " (commit_line(repo, c)) }
            }
            Some(LastCommit::Pending) => {
                p.lastcommit { "Latest commit: " span.muted { (PENDING) } }
            }
            _ => {}
        }
        @if p.commit.is_none() {
            p { "This repository is empty: push to it with git, or upload with huggingface_hub." }
        } @else {
            (breadcrumbs(repo, rev, &p.dir))
            table.tree {
                caption.visually-hidden { "Files in " @if p.dir.is_empty() { "the root" } @else { (p.dir) } }
                thead { tr { th scope="col" { "Name" } th.num scope="col" { "Size" } th scope="col" { "Storage" } } }
                tbody {
                    @if !p.dir.is_empty() {
                        @let parent = p.dir.rsplit_once('/').map_or("", |(d, _)| d);
                        tr { td { a href=(urls::tree(repo, rev, parent)) aria-label="Parent directory" { ".." } } td {} td {} }
                    }
                    @for e in &p.entries {
                        tr.entry data-kind=(kind_name(&e.kind)) {
                            td.name {
                                @match e.kind {
                                    EntryKind::Dir => { a href=(urls::tree(repo, rev, &e.path)) { (e.name) "/" } }
                                    EntryKind::Submodule => { (e.name) }
                                    _ => { a href=(urls::blob(repo, rev, &e.path)) { (e.name) } }
                                }
                            }
                            td.num {
                                @match e.kind {
                                    EntryKind::File { size: n } | EntryKind::Lfs { size: n, .. } => { (size(n)) }
                                    _ => {}
                                }
                            }
                            td { (storage_badge(&e.kind)) }
                        }
                    }
                    @if p.entries.is_empty() { tr { td colspan="3" .muted { "Nothing here." } } }
                }
            }
            (pager(&base, &p.paging))
        }
        @if let Some(readme) = &p.readme {
            section.readme aria-labelledby="readme-title" {
                h2 #readme-title { a href=(urls::blob(repo, rev, &readme.path)) { (readme.path) } }
                @match &readme.body {
                    ReadmeBody::Html(html) => { div.markdown { (html.markup()) } }
                    ReadmeBody::Linked => { p { "This README is too large to show here; open it above." } }
                }
            }
        }
        @if let Some(clone) = &p.clone { (clone_box(&p.chrome.repo, clone)) }
    };
    page(&title, viewer, body)
}

fn kind_name(kind: &EntryKind) -> &'static str {
    match kind {
        EntryKind::Dir => "dir",
        EntryKind::File { .. } => "file",
        EntryKind::Lfs { .. } => "lfs",
        EntryKind::Submodule => "submodule",
        EntryKind::Symlink => "symlink",
    }
}

/// The commands that get the repository: git (HTTP and ssh), huggingface_hub, a mount.
pub fn clone_box(repo: &RepoInfo, clone: &CloneInfo) -> Markup {
    let name = repo.name.rsplit('/').next().unwrap_or(&repo.name);
    let http = format!("{}/{}.git", clone.base_url, repo.name);
    let hub_id = repo.name.strip_prefix("datasets/").unwrap_or(&repo.name);
    let kind = if repo.is_dataset {
        ", repo_type=\"dataset\""
    } else {
        ""
    };
    let hub = format!(
        "export HF_ENDPOINT={}\npython -c 'from huggingface_hub import snapshot_download; print(snapshot_download(\"{hub_id}\"{kind}))'",
        clone.base_url
    );
    let mount = format!(
        "GIT_LFS_SKIP_SMUDGE=1 git clone {http} && cd {name}\ngit xet mount ../{name}-view   # LFS files read lazily, in byte ranges"
    );
    let rows: [(&str, &str, String); 4] = [
        (
            "clone-http",
            "git over HTTP",
            format!("git xet install   # once per machine\ngit clone {http}"),
        ),
        (
            "clone-ssh",
            "git over ssh",
            format!("git clone git@{}:{}.git", clone.ssh_host, repo.name),
        ),
        ("clone-hub", "huggingface_hub", hub),
        ("clone-mount", "git xet mount", mount),
    ];
    html! {
        section.clone aria-labelledby="clone-title" {
            h2 #clone-title { "Get this repository" }
            p.muted { "Private repositories ask for a token: as the password of git's prompt, or in "
                code { "HF_TOKEN" } "." }
            @for (id, label, command) in &rows {
                h3 #(id) { (label) }
                pre { code { (command) } }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CommitSummary, Paging, RepoChrome, Tab, TreeEntry};

    fn dir_page(commit: Option<LastCommit>) -> String {
        let model = TreePage {
            chrome: RepoChrome {
                repo: RepoInfo {
                    name: "org/big".into(),
                    is_dataset: false,
                    private: false,
                },
                rev: "main".into(),
                default_branch: Some("main".into()),
                branches: vec!["main".into()],
                tags: Vec::new(),
                tab: Tab::Files,
            },
            commit,
            dir: "files".into(),
            entries: vec![TreeEntry {
                name: "a.txt".into(),
                path: "files/a.txt".into(),
                kind: EntryKind::File { size: 3 },
            }],
            paging: Paging {
                page: 0,
                per_page: 200,
                more: false,
                total: Some(1),
            },
            readme: None,
            clone: None,
        };
        render(&model, &Viewer::default())
    }

    #[test]
    fn a_directory_lists_whether_or_not_its_last_commit_is_known() {
        let known = dir_page(Some(LastCommit::Known(CommitSummary {
            sha: "ab".repeat(20),
            parents: Vec::new(),
            author: "Ann".into(),
            time: 1_700_000_000,
            subject: "add the files".into(),
        })));
        assert!(known.contains("Latest commit: "), "{known}");
        assert!(known.contains(&format!("/org/big/commit/{}", "ab".repeat(20))));
        assert!(!known.contains(PENDING));
        let pending = dir_page(Some(LastCommit::Pending));
        assert!(pending.contains(PENDING), "{pending}");
        assert!(!pending.contains("/org/big/commit/"));
        let unknown = dir_page(Some(LastCommit::Unknown));
        assert!(!unknown.contains("Latest commit") && !unknown.contains("is empty"));
        for page in [&known, &pending, &unknown] {
            assert!(page.contains("/org/big/blob/main/files/a.txt"), "{page}");
        }
        assert!(dir_page(None).contains("This repository is empty"));
    }
}
