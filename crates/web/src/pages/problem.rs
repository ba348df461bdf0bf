//! Pages that carry no repository data: an error (not found looks the same whether the
//! repository is missing or private), and the sign-in form.

use maud::html;

use crate::layout::page;
use crate::model::{Problem, Viewer};
use crate::urls;

pub fn render(p: &Problem, viewer: &Viewer) -> String {
    let body = html! {
        h1 { (p.title) }
        p.detail { (p.detail) }
        @if p.offer_sign_in && viewer.session_user.is_none() {
            p { a href=(urls::sign_in(&viewer.here)) { "Sign in with a token" } " to see private repositories." }
        }
        p { a href="/" { "All repositories" } }
    };
    page(&p.title, viewer, body)
}

/// The sign-in form: a token, posted here; `next` is where to go afterwards, `error` what
/// went wrong with the last try.
pub fn sign_in(next: &str, error: Option<&str>, viewer: &Viewer) -> String {
    let body = html! {
        h1 { "Sign in" }
        p { "Paste an access token: one from " code { "git xet server token create" }
            " (or your identity provider's, where this server accepts one). The browser keeps it in a "
            "cookie that scripts cannot read and that is sent to this server only." }
        @if let Some(error) = error { p.error role="alert" { (error) } }
        form.signin method="post" action=(urls::SIGN_IN) {
            input type="hidden" name="next" value=(next);
            label for="token" { "Access token" }
            input #token type="password" name="token" autocomplete="off" required spellcheck="false";
            button type="submit" { "Sign in" }
        }
    };
    page("Sign in", viewer, body)
}
