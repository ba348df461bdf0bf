//! The server's page (`/`: every repository the viewer may read) and an organization's
//! (`/{org}`): repositories with size, dedup ratio and last push, and how storage grew.

use maud::html;

use super::{size, when};
use crate::format::{human_bytes, ratio};
use crate::layout::page;
use crate::model::{ListingPage, Viewer};
use crate::pages::status::usage_list;
use crate::svg::growth;
use crate::urls;

pub fn render(p: &ListingPage, viewer: &Viewer) -> String {
    let title = match &p.org {
        Some(org) => org.clone(),
        None => "Repositories".to_string(),
    };
    let body = html! {
        h1 { (title) }
        h2 { @if p.server_wide { "All repositories on this server" } @else { "Repositories you may read" } }
        (usage_list("usage-total", &p.total))
        table.repos {
            caption.visually-hidden { "Repositories" }
            thead { tr {
                th scope="col" { "Repository" } th.num scope="col" { "Logical" } th.num scope="col" { "Stored" }
                th.num scope="col" { "Dedup" } th scope="col" { "Last push" }
            } }
            tbody {
                @for row in &p.repos {
                    tr.repo data-repo=(row.repo.name) {
                        td { a href=(urls::repo(&row.repo.name)) { (row.repo.name) }
                            @if row.repo.is_dataset { " " span.badge { "dataset" } }
                            @if row.repo.private { " " span.badge.private { "private" } } }
                        td.num { (human_bytes(row.usage.logical_bytes)) }
                        td.num { (human_bytes(row.usage.stored_bytes)) }
                        td.num { (ratio(row.usage.logical_bytes, row.usage.stored_bytes)) }
                        td { @if let Some(t) = row.last_push { (when(t)) } @else { span.muted { "never" } } }
                    }
                }
                @if p.repos.is_empty() { tr { td colspan="5" .muted { "No repositories yet." } } }
            }
        }
        @if !p.growth.is_empty() {
            section aria-labelledby="growth-title" {
                h2 #growth-title { "Storage over time" }
                p { "The last " (p.growth.len()) " pushes: LFS bytes each brought, and how many of them were new "
                    "on the server (chunks no earlier object in these pushes used)." }
                (growth("Cumulative bytes over the recent pushes", &p.growth))
                table.growth {
                    caption.visually-hidden { "Bytes per push, oldest first" }
                    thead { tr { th scope="col" { "Push" } th.num scope="col" { "LFS bytes" } th.num scope="col" { "New bytes" } } }
                    tbody { @for g in &p.growth { tr { td { (when(g.time)) } td.num { (size(g.logical)) } td.num { (size(g.new)) } } } }
                }
            }
        }
    };
    page(&title, viewer, body)
}
