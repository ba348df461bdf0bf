//! The web view of the hosted repositories: the routes and their glue. Pages are built by
//! the git-xet-web crate (pure: models in, HTML out); this module reads git (gitview.rs)
//! and the index (chunks.rs), decides access (access.rs, the routes' own rules) and keeps
//! browser sessions (session.rs). Every page is a GET that changes nothing; the sign-in and
//! sign-out forms are POSTs checked for this server's origin.
//!
//! | path                                   | page                                        |
//! |----------------------------------------|---------------------------------------------|
//! | `/`, `/{org}`                          | repositories, usage, storage over time      |
//! | `/{repo}`, `/{repo}/tree/{rev}/{path}` | files (paged), README, clone commands       |
//! | `/{repo}/blob/{rev}/{path}`            | a file: text, or size and hashes; tensors   |
//! | `/{repo}/commits/{rev}[/{path}]`       | commits; a file's versions and their cost   |
//! | `/{repo}/commit/{sha}`                 | one commit's changed files                  |
//! | `/{repo}/status`                       | LFS files at HEAD, pushes, locks            |
//! | `/-/sign-in`, `/-/sign-out`            | the session cookie                          |
//!
//! Downloads are the Hub's `/{repo}/resolve/{rev}/{path}` (ranges served).

mod access;
mod chunks;
mod gitview;
mod history;
mod listing;
mod repo_pages;
pub mod session;
mod tree_listing;

use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use git_xet_web::layout::{SECURITY_HEADERS, STYLE_SHEET};
use git_xet_web::model::{CommitSummary, Problem, Viewer};
use git_xet_web::route::{self, View};
use git_xet_web::{pages, urls};

use crate::error::ServerError;
use crate::state::SharedState;
use git_xet_index::RepoName;

/// The routes at fixed paths: the style sheet and the session forms.
pub fn router() -> Router<SharedState> {
    Router::new()
        .route(urls::STYLE, get(style))
        .route(
            session::SIGN_IN,
            get(session::sign_in_form).post(session::sign_in),
        )
        .route(session::SIGN_OUT, axum::routing::post(session::sign_out))
}

async fn style() -> Response {
    let mut response = STYLE_SHEET.into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/css; charset=utf-8"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=3600"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// `GET /`: every repository the viewer may read.
pub async fn server_page(State(state): State<SharedState>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let viewer = viewer_of(&parts.uri, &parts.extensions);
    listing::render(&state, &parts.headers, &viewer, None)
        .await
        .unwrap_or_else(|e| problem_page(&e, &viewer))
}

/// A page under a repository path, if `request` asks for one (GET or HEAD of a path
/// route.rs reads; the bare repository path only from a browser, which asks for HTML, so
/// that git's and the API's answers there stay theirs). `Err` hands the request back.
pub async fn dispatch(state: &SharedState, request: Request) -> Result<Response, Request> {
    if !matches!(*request.method(), Method::GET | Method::HEAD) {
        return Err(request);
    }
    let parsed = route::parse(request.uri().path());
    let wants_html = crate::status::wants_page(&Method::GET, request.headers());
    match &parsed {
        Ok(r) if r.view == View::Home && !wants_html => return Err(request),
        Err(route::RouteError::NoPage) => return Err(request),
        _ => {}
    }
    let (parts, _) = request.into_parts();
    let viewer = viewer_of(&parts.uri, &parts.extensions);
    let result = match parsed {
        Ok(r) => page(state, &parts, &viewer, r).await,
        Err(e) => Err(ServerError::bad_request(e.to_string())),
    };
    Ok(result.unwrap_or_else(|e| problem_page(&e, &viewer)))
}

async fn page(
    state: &SharedState,
    parts: &Parts,
    viewer: &Viewer,
    r: route::RepoRoute,
) -> Result<Response, ServerError> {
    let headers = &parts.headers;
    let n = route::page_number(parts.uri.query());
    // `/{name}` is a one-segment repository the viewer may read, else an organization's
    // page (so a private repository's name answers as a missing organization does).
    let org_like = match r.repo.strip_prefix("datasets/") {
        Some(org) => !org.contains('/'),
        None => !r.repo.contains('/'),
    };
    if org_like && r.view == View::Home {
        let root = state.config.repos_dir();
        let single_repo = !r.repo.starts_with("datasets/")
            && RepoName::parse(&r.repo).is_ok_and(|n| n.bare_dir(&root).join("HEAD").is_file());
        if !single_repo || access::open(state, headers, &r.repo).is_err() {
            return listing::render(state, headers, viewer, Some(&r.repo)).await;
        }
    }
    let repo = access::open(state, headers, &r.repo)?;
    match r.view {
        View::Home => repo_pages::tree(state, headers, viewer, &repo, None, "", n).await,
        View::Tree { rev, path } => {
            repo_pages::tree(state, headers, viewer, &repo, Some(&rev), &path, n).await
        }
        View::Blob { rev, path } => repo_pages::blob(state, viewer, &repo, &rev, &path).await,
        View::Commits { rev, path: None } => history::commits(viewer, &repo, &rev, n).await,
        View::Commits {
            rev,
            path: Some(path),
        } => history::file_history(state, viewer, &repo, &rev, &path, n).await,
        View::Commit { sha } => history::commit(viewer, &repo, &sha).await,
        View::Status => listing::status(state, viewer, &repo).await,
    }
}

/// Who is looking at `request`'s page.
pub(crate) fn viewer(request: &Request) -> Viewer {
    viewer_of(request.uri(), request.extensions())
}

pub(crate) fn viewer_of(uri: &Uri, extensions: &axum::http::Extensions) -> Viewer {
    Viewer {
        session_user: extensions
            .get::<session::SessionUser>()
            .map(|u| u.0.clone()),
        here: uri.path_and_query().map_or("/", |p| p.as_str()).to_string(),
    }
}

/// A page with the pages' headers.
pub(crate) fn html(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    for (name, value) in SECURITY_HEADERS {
        h.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    h.insert(
        header::VARY,
        HeaderValue::from_static("Cookie, Authorization"),
    );
    response
}

pub(crate) fn html_ok(body: String) -> Response {
    html(StatusCode::OK, body)
}

/// A redirect to another page of this server.
pub(crate) fn redirect(to: &str) -> Response {
    let mut response = StatusCode::FOUND.into_response();
    if let Ok(location) = HeaderValue::from_str(to) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

/// An error as a page, by variant: not found and sign-in answers offer the sign-in form;
/// no challenge header, so browsers show the page rather than a password prompt.
pub(crate) fn problem_page(error: &ServerError, viewer: &Viewer) -> Response {
    let status = error.status();
    if status.is_server_error() {
        tracing::error!(%status, "web page: {error}");
    }
    let (title, offer_sign_in) = match error {
        ServerError::Unauthorized(_) => ("Sign in to see this", true),
        ServerError::NotFound(_) => ("Not found", true),
        ServerError::Forbidden(_) => ("Not allowed", false),
        ServerError::BadRequest(_) => ("Bad request", false),
        _ => ("Something went wrong", false),
    };
    let problem = Problem {
        status: status.as_u16(),
        title: title.into(),
        detail: error.to_string(),
        offer_sign_in,
    };
    html(status, pages::problem::render(&problem, viewer))
}

pub(crate) fn commit_summary(c: gitview::Commit) -> CommitSummary {
    CommitSummary {
        sha: c.sha,
        parents: c.parents,
        author: c.author,
        time: c.time,
        subject: c.subject,
    }
}
