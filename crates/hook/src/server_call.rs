//! The pre-receive check's requests to its XET server: the object check (hook/mod.rs) and
//! the lock listing (hook/lock_check.rs) both send one kind of request, made here once: a
//! client with the shared settings, a current-thread runtime, the hook's token, and failures
//! as [`HookError`] variants.

use std::time::Duration;

use reqwest::{Method, RequestBuilder};

use super::HookError;
use super::HookSettings;

/// Most of an error body shown to the pusher.
const SHOWN_BODY: usize = 300;

pub struct HookServer<'a> {
    settings: &'a HookSettings,
    http: reqwest::Client,
    rt: tokio::runtime::Runtime,
}

impl<'a> HookServer<'a> {
    /// The hook talks to its own server: the shared defaults (and the environment's proxy
    /// variables), not a user's git settings.
    pub fn new(settings: &'a HookSettings) -> Result<HookServer<'a>, HookError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(HookError::Runtime)?;
        Ok(HookServer {
            settings,
            http: git_xet_io::http::builder().build().map_err(|source| {
                HookError::ServerUnreachable {
                    server: settings.server_url.clone(),
                    what: "building the HTTP client",
                    source,
                }
            })?,
            rt,
        })
    }

    /// `<server>/<repo>.git<path>`, `path` one of `git_xet_core::api::routes`' (`/info/...`).
    pub fn url(&self, path: &str) -> String {
        format!(
            "{}/{}.git{path}",
            self.settings.server_url, self.settings.repo
        )
    }

    /// Sends `method url` with the hook's token, `timeout` for the whole exchange and what
    /// `build` adds; the body of a success. `what` names the request in errors.
    pub fn call(
        &self,
        method: Method,
        url: &str,
        timeout: Duration,
        what: &'static str,
        build: impl FnOnce(RequestBuilder) -> RequestBuilder,
    ) -> Result<bytes::Bytes, HookError> {
        let unreachable = |source| HookError::ServerUnreachable {
            server: self.settings.server_url.clone(),
            what,
            source,
        };
        let mut request = self.http.request(method, url).timeout(timeout);
        if let Some(token) = &self.settings.token {
            request = request.bearer_auth(token);
        }
        let request = build(request);
        let (status, body) = self
            .rt
            .block_on(async {
                let response = request.send().await?;
                let status = response.status();
                let body = response.bytes().await?;
                Ok((status, body))
            })
            .map_err(unreachable)?;
        if !status.is_success() {
            return Err(HookError::ServerRefused {
                server: self.settings.server_url.clone(),
                what,
                status: status.as_u16(),
                body: String::from_utf8_lossy(&body)
                    .chars()
                    .take(SHOWN_BODY)
                    .collect(),
            });
        }
        Ok(body)
    }

    /// An answer that does not read as `what` should.
    pub fn bad_answer(&self, what: &'static str, detail: String) -> HookError {
        HookError::ServerAnswer {
            server: self.settings.server_url.clone(),
            what,
            detail,
        }
    }
}
