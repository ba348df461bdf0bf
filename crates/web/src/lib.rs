//! The git-xet server's web pages, pure: the server reads git and its index, fills the page
//! models (model.rs) and gets whole HTML documents back. No HTTP, no git, no index here, so
//! every page is a plain test subject.
//!
//! Safety by construction: templates are maud's, which escapes every interpolated value;
//! the only raw HTML is a README after ammonia's sanitizer ([`markdown::SafeHtml`], made
//! nowhere else) and the SVG the charts build from numbers. The pages run no script and
//! are sent with a strict Content-Security-Policy ([`layout::CONTENT_SECURITY_POLICY`]).
//!
//! | module        | job                                                                   |
//! |---------------|-----------------------------------------------------------------------|
//! | `model`       | the pages' data: plain structs                                        |
//! | `pages`       | one renderer per kind of page                                         |
//! | `layout`      | the shared frame, repository tabs, breadcrumbs, pager, security headers, CSS |
//! | `markdown`    | READMEs: Markdown, then sanitized HTML                                |
//! | `safetensors` | a safetensors header from untrusted bytes                             |
//! | `costs`       | what each version of a file cost: chunks new vs shared                |
//! | `svg`         | inline SVG charts                                                     |
//! | `urls`, `route` | building the pages' URLs, and reading them back                     |
//! | `format`      | sizes, ratios, dates                                                  |

#![forbid(unsafe_code)]

pub mod costs;
pub mod format;
pub mod layout;
pub mod markdown;
pub mod model;
pub mod pages;
pub mod route;
pub mod safetensors;
pub mod svg;
pub mod urls;

/// Items on one page of a directory listing.
pub const ENTRIES_PER_PAGE: usize = 200;
/// Commits on one page of a history.
pub const COMMITS_PER_PAGE: usize = 30;
/// Versions on one page of a file's history.
pub const VERSIONS_PER_PAGE: usize = 20;
/// Older versions each version's cost is compared with, at least (past the page's own).
pub const COST_LOOKBACK: usize = 20;
/// Changed files listed on a commit's page.
pub const CHANGES_LISTED: usize = 1000;
/// Lines of a text file shown.
pub const MAX_LINES: usize = 10_000;
/// Largest text file shown inline.
pub const MAX_TEXT: u64 = 1 << 20;
