//! A file at a revision: text with line numbers, or for binary and LFS files their size,
//! hashes and download link; a safetensors file's tensors as a table.

use maud::{html, Markup};

use super::size;
use crate::format::human_bytes;
use crate::layout::{breadcrumbs, page, repo_chrome};
use crate::model::{BlobBody, BlobPage, SafetensorsHeader, Viewer};
use crate::urls;

pub fn render(p: &BlobPage, viewer: &Viewer) -> String {
    let repo = &p.chrome.repo.name;
    let rev = &p.chrome.rev;
    let title = format!("{} at {rev} · {repo}", p.path);
    let body = html! {
        (repo_chrome(&p.chrome))
        (breadcrumbs(repo, rev, &p.path))
        ul.actions {
            li { a href=(urls::resolve(repo, rev, &p.path)) download { "Download" } }
            li { a href=(urls::commits(repo, rev, Some(&p.path))) { "History" } }
        }
        @match &p.body {
            BlobBody::Text { size: n, lines, truncated } => {
                p.muted { (size(*n)) ", " (lines.len()) @if *truncated { "+" } " lines" }
                (code(lines))
                @if *truncated { p { "Only the beginning is shown; download the file for the rest." } }
            }
            BlobBody::Binary { size: n, oid } => {
                dl.facts {
                    dt { "Size" } dd.size-fact { (size(*n)) }
                    dt { "Stored" } dd { "in git (blob " code { (oid) } ")" }
                }
                p { "This file is not shown: it is binary or too large." }
            }
            BlobBody::Lfs(lfs) => {
                dl.facts {
                    dt { "Size" } dd.size-fact { (size(lfs.size)) }
                    dt { "Stored" } dd {
                        span.badge.lfs { "LFS" }
                        @if lfs.xet_hash.is_some() { " " span.badge.xet { "XET" } " in chunks on this server" }
                        @else { " " span.badge.missing { "not stored" } " this server does not hold the object" }
                    }
                    dt { "sha256" } dd { code.hash.sha256 { (lfs.sha256) } }
                    @if let Some(xet) = &lfs.xet_hash { dt { "XET hash" } dd { code.hash.xet { (xet) } } }
                }
            }
        }
        @if let Some(header) = &p.safetensors {
            section aria-labelledby="tensors-title" {
                h2 #tensors-title { "Tensors" }
                @match header {
                    Ok(h) => { (tensors(h)) }
                    Err(why) => { p.error { "The safetensors header could not be read: " (why) } }
                }
            }
        }
    };
    page(&title, viewer, body)
}

fn code(lines: &[String]) -> Markup {
    html! {
        table.code {
            caption.visually-hidden { "File contents, one row per line" }
            tbody {
                @for (i, line) in lines.iter().enumerate() {
                    tr #{ "L" (i + 1) } { td.ln { (i + 1) } td { code { (line) } } }
                }
            }
        }
    }
}

fn tensors(h: &SafetensorsHeader) -> Markup {
    html! {
        p {
            (h.count) " tensors, " (human_bytes(h.data_bytes)) " of data; header "
            (human_bytes(h.header_bytes)) "."
            @if h.tensors.len() < h.count { " The first " (h.tensors.len()) " are listed." }
        }
        @if !h.metadata.is_empty() {
            dl.facts.metadata { @for (k, v) in &h.metadata { dt { (k) } dd { (v) } } }
        }
        table.tensors {
            caption.visually-hidden { "Tensors in file order" }
            thead { tr {
                th scope="col" { "Name" } th scope="col" { "dtype" } th scope="col" { "Shape" }
                th.num scope="col" { "Bytes" }
            } }
            tbody {
                @for t in &h.tensors {
                    tr.tensor {
                        td { code { (t.name) } }
                        td { (t.dtype) }
                        td { "[" (t.shape.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")) "]" }
                        td.num data-bytes=(t.bytes) { (human_bytes(t.bytes)) }
                    }
                }
            }
        }
    }
}
