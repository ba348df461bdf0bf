//! The frame every page shares: document head (the style sheet, no script), a skip link,
//! the header with sign-in state, landmarks, and for repository pages the name, badges,
//! tabs and branch list. Also the security headers every page is sent with.

use maud::{html, Markup, DOCTYPE};

use crate::model::{RepoChrome, RepoInfo, Tab, Viewer};
use crate::urls;

/// The pages' Content-Security-Policy: nothing but this server's style sheet and images
/// loads, no script runs (the pages have none), no form posts elsewhere, no framing.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; \
img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Headers sent with every page besides the CSP: name and value.
pub const SECURITY_HEADERS: &[(&str, &str)] = &[
    ("content-security-policy", CONTENT_SECURITY_POLICY),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "same-origin"),
    ("x-frame-options", "DENY"),
    ("cache-control", "no-store"),
];

/// The style sheet served at [`urls::STYLE`].
pub const STYLE_SHEET: &str = include_str!("../static/style.css");

/// A whole page: `title` in the tab, `body` inside `<main>`.
pub fn page(title: &str, viewer: &Viewer, body: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · git-xet" }
                link rel="stylesheet" href=(urls::STYLE);
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header.site {
                    a.brand href="/" { "git-xet" }
                    nav aria-label="Account" { (account(viewer)) }
                }
                main #main tabindex="-1" { (body) }
                footer.site {
                    p { "Served by git-xet. Files are stored once per chunk (XET): "
                        "a new version costs only the bytes that changed." }
                }
            }
        }
    }
    .into_string()
}

fn account(viewer: &Viewer) -> Markup {
    html! {
        @if let Some(user) = &viewer.session_user {
            span.who { "Signed in as " strong { (user) } }
            form.inline method="post" action=(urls::SIGN_OUT) {
                button type="submit" { "Sign out" }
            }
        } @else {
            a href=(urls::sign_in(&viewer.here)) { "Sign in" }
        }
    }
}

/// The repository's name, with links to its organization and itself.
pub fn repo_heading(repo: &RepoInfo) -> Markup {
    let (org, name) = match repo.name.rsplit_once('/') {
        Some((org, name)) => (Some(org), name),
        None => (None, repo.name.as_str()),
    };
    html! {
        h1.repo {
            @if let Some(org) = org {
                a href=(urls::repo(org)) { (org) } span.sep aria-hidden="true" { " / " }
            }
            a href=(urls::repo(&repo.name)) { (name) }
            @if repo.is_dataset { " " span.badge { "dataset" } }
            @if repo.private { " " span.badge.private { "private" } }
        }
    }
}

/// Name, tabs and the revision picker of a repository page.
pub fn repo_chrome(chrome: &RepoChrome) -> Markup {
    let repo = &chrome.repo.name;
    let tab = |which: Tab, label: &str, href: String| {
        html! {
            li { a href=(href) aria-current=[(chrome.tab == which).then_some("page")] { (label) } }
        }
    };
    html! {
        (repo_heading(&chrome.repo))
        nav.tabs aria-label="Repository" {
            ul {
                (tab(Tab::Files, "Files", urls::tree(repo, &chrome.rev, "")))
                (tab(Tab::Commits, "Commits", urls::commits(repo, &chrome.rev, None)))
                (tab(Tab::Status, "Storage and locks", urls::status(repo)))
            }
        }
        @if !chrome.branches.is_empty() || !chrome.tags.is_empty() {
            details.revs {
                summary { "Revision: " code { (chrome.rev) } }
                div.revlist {
                    @if !chrome.branches.is_empty() {
                        h2.small { "Branches" }
                        ul { @for b in &chrome.branches {
                            li { a href=(urls::tree(repo, b, "")) { (b) }
                                @if chrome.default_branch.as_deref() == Some(b) { " " span.badge { "default" } } }
                        } }
                    }
                    @if !chrome.tags.is_empty() {
                        h2.small { "Tags" }
                        ul { @for t in &chrome.tags { li { a href=(urls::tree(repo, t, "")) { (t) } } } }
                    }
                }
            }
        }
    }
}

/// Breadcrumbs of a path at a revision: the root, then each directory, the last one plain.
pub fn breadcrumbs(repo: &str, rev: &str, path: &str) -> Markup {
    let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    html! {
        nav.crumbs aria-label="Path" {
            ol {
                li { a href=(urls::tree(repo, rev, "")) { (repo.rsplit('/').next().unwrap_or(repo)) } }
                @for (i, part) in parts.iter().enumerate() {
                    @if i + 1 == parts.len() {
                        li { span aria-current="location" { (part) } }
                    } @else {
                        li { a href=(urls::tree(repo, rev, &parts[..=i].join("/"))) { (part) } }
                    }
                }
            }
        }
    }
}

/// Previous/next links of a paged list at `base`.
pub fn pager(base: &str, paging: &crate::model::Paging) -> Markup {
    html! {
        @if paging.page > 0 || paging.more {
            nav.pager aria-label="Pages" {
                @if paging.page > 0 {
                    a rel="prev" href=(urls::page(base, paging.page - 1)) { "← Newer / previous" }
                }
                span { "Page " (paging.page + 1)
                    @if let Some(total) = paging.total {
                        " of " (total.div_ceil(paging.per_page.max(1)).max(1))
                    }
                }
                @if paging.more {
                    a rel="next" href=(urls::page(base, paging.page + 1)) { "Next / older →" }
                }
            }
        }
    }
}
