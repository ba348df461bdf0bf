//! Signing in from a browser: a token pasted into a form (POST) is kept in a cookie that is
//! `Secure` (https, or http on loopback, which browsers treat as secure), `HttpOnly` (no
//! script reads it) and `SameSite=Strict` (no other site's page sends it). Posts are also
//! checked for this server's own `Origin`, so no other page can sign a visitor in or out.
//!
//! The cookie is a credential for reads only: a GET or HEAD without an `Authorization`
//! header gets one from the cookie (when the token still verifies), so every read route
//! (pages, downloads) applies its usual rules to it. Writes need the header itself, so a
//! cookie can never change anything.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use git_xet_web::{pages::problem, route, urls};

use crate::error::ServerError;
use crate::state::SharedState;
use git_xet_identity::auth::Accepts;

/// The cookie's name.
pub const COOKIE: &str = "git_xet_session";

/// Who a session belongs to, for the page header (a request extension).
#[derive(Debug, Clone)]
pub struct SessionUser(pub String);

/// The session token a request's cookies carry.
fn session_token(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == COOKIE && !value.is_empty()).then(|| value.to_string())
        })
}

/// Middleware: a read with the session cookie and no `Authorization` is authorized by the
/// cookie's token. A token that no longer verifies is ignored (the page shows as to an
/// anonymous visitor, with the sign-in link).
pub async fn cookie_credential(
    State(state): State<SharedState>,
    mut request: Request,
    next: Next,
) -> Response {
    let read = matches!(*request.method(), Method::GET | Method::HEAD);
    if read && !request.headers().contains_key(header::AUTHORIZATION) {
        if let Some(token) = session_token(request.headers()) {
            if let Ok(verified) = state.verify_credential(&token, Accepts::UserTokens) {
                if let Ok(value) = HeaderValue::from_str(&format!("Bearer {token}")) {
                    request.headers_mut().insert(header::AUTHORIZATION, value);
                    let user = verified.holder.map_or_else(|| "token".into(), |h| h.user);
                    request.extensions_mut().insert(SessionUser(user));
                }
            }
        }
    }
    next.run(request).await
}

/// Whether a form post comes from this server's own pages: its `Origin` is the server's
/// (as clients reach it), or, without one, the browser says the request is same-origin.
fn same_origin(state: &SharedState, headers: &HeaderMap) -> bool {
    let ours = origin_of(&state.base_url(headers));
    match headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        Some(origin) => origin.eq_ignore_ascii_case(&ours),
        None => headers
            .get("sec-fetch-site")
            .is_some_and(|v| v.as_bytes() == b"same-origin"),
    }
}

/// `scheme://host[:port]` of a URL.
fn origin_of(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    format!("{scheme}://{host}")
}

/// A local path to return to (`/...`, never `//host` or a scheme), else `/`.
fn local_path(next: Option<String>) -> String {
    next.filter(|n| n.starts_with('/') && !n.starts_with("//") && !n.contains(['\\', '\r', '\n']))
        .unwrap_or_else(|| "/".into())
}

/// `GET /-/sign-in`: the form.
pub async fn sign_in_form(request: Request) -> Response {
    let next = local_path(route::query_value(request.uri().query(), "next"));
    let viewer = super::viewer(&request);
    super::html(StatusCode::OK, problem::sign_in(&next, None, &viewer))
}

/// `POST /-/sign-in` (`token`, `next` form fields): checks the token, then sets the cookie
/// and returns to `next`.
pub async fn sign_in(State(state): State<SharedState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let viewer = super::viewer_of(&parts.uri, &parts.extensions);
    if !same_origin(&state, &parts.headers) {
        return refused_cross_site(&viewer);
    }
    let form = match axum::body::to_bytes(body, 16 << 10).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(_) => String::new(),
    };
    let field = |key| route::query_value(Some(&form), key);
    let next = local_path(field("next"));
    let token = field("token").unwrap_or_default().trim().to_string();
    let again =
        |status, why: &str| super::html(status, problem::sign_in(&next, Some(why), &viewer));
    if token.is_empty()
        || !token
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b';' | b',' | b'"' | b'\\'))
    {
        return again(
            StatusCode::BAD_REQUEST,
            "Paste the token itself: it has no spaces.",
        );
    }
    let verified = state
        .verify_credential(&token, Accepts::UserTokens)
        .and_then(|v| match &v.holder {
            Some(holder) => state.not_revoked_id(&holder.id).map(|()| v),
            None => Ok(v),
        });
    let verified = match verified {
        Ok(v) => v,
        Err(e) => {
            let status = e.status();
            return again(status, &format!("That token was not accepted: {e}"));
        }
    };
    let max_age = verified
        .exp
        .saturating_sub(git_xet_io::time::now_secs())
        .max(1);
    let cookie =
        format!("{COOKIE}={token}; Path=/; Max-Age={max_age}; Secure; HttpOnly; SameSite=Strict");
    redirect(&next, &cookie)
}

/// `POST /-/sign-out`: clears the cookie.
pub async fn sign_out(State(state): State<SharedState>, request: Request) -> Response {
    let viewer = super::viewer(&request);
    if !same_origin(&state, request.headers()) {
        return refused_cross_site(&viewer);
    }
    let cookie = format!("{COOKIE}=; Path=/; Max-Age=0; Secure; HttpOnly; SameSite=Strict");
    redirect("/", &cookie)
}

fn redirect(to: &str, cookie: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    let h = response.headers_mut();
    if let (Ok(location), Ok(cookie)) = (HeaderValue::from_str(to), HeaderValue::from_str(cookie)) {
        h.insert(header::LOCATION, location);
        h.insert(header::SET_COOKIE, cookie);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn refused_cross_site(viewer: &git_xet_web::model::Viewer) -> Response {
    super::problem_page(
        &ServerError::Forbidden(
            "this form was sent from another site's page (its Origin is not this server's); sign in from this server's own page".into(),
        ),
        viewer,
    )
}

/// The sign-in routes' paths, for the router.
pub const SIGN_IN: &str = urls::SIGN_IN;
pub const SIGN_OUT: &str = urls::SIGN_OUT;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_origins_and_return_paths() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; git_xet_session=xet1.ab.cd; b=2"),
        );
        assert_eq!(session_token(&h).as_deref(), Some("xet1.ab.cd"));
        h.insert(header::COOKIE, HeaderValue::from_static("git_xet_session="));
        assert_eq!(session_token(&h), None);
        assert_eq!(origin_of("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
        assert_eq!(origin_of("https://x.example/prefix/"), "https://x.example");
        assert_eq!(local_path(Some("/o/m/tree/main".into())), "/o/m/tree/main");
        for bad in [
            "//evil.example",
            "https://evil.example",
            "x",
            "/\\evil",
            "/a\r\nSet-Cookie: x",
        ] {
            assert_eq!(local_path(Some(bad.into())), "/", "{bad}");
        }
        assert_eq!(local_path(None), "/");
    }
}
