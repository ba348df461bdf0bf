//! The `xet` transfer's batch API action (docs/formats.md, "The `xet` transfer in the git-lfs
//! Batch API"): `href` is a token-refresh URL (GET with the LFS credentials returns
//! `{"accessToken","exp","casUrl"}`); the headers carry the CAS URL, a CAS access token, its
//! expiry (unix seconds) and a session id; download actions also carry the XET file hash.

use std::fmt;

use crate::protocol::{Action, Operation};
use crate::LfsError;
use git_xet_core::MerkleHash;

pub use git_xet_core::lfs::{
    HEADER_ACCESS_TOKEN, HEADER_AWAIT_XORBS_LIMIT, HEADER_CAS_URL, HEADER_FILE_HASH,
    HEADER_SESSION_ID, HEADER_TOKEN_EXPIRATION, HEADER_UPLOAD_OBJECTS,
};

/// What the agent needs from one object's action.
#[derive(Clone, PartialEq, Eq)]
pub struct XetAction {
    /// Base URL of the CAS API, without a trailing slash.
    pub cas_url: String,
    pub access_token: String,
    /// Unix seconds.
    pub token_expiration: u64,
    pub session_id: Option<String>,
    /// The token-refresh URL (`href`); empty when the server gave none.
    pub refresh_url: String,
    /// Download actions: the XET hash of the object.
    pub file_hash: Option<MerkleHash>,
    /// An `Authorization` header the server put in the action, used for token refresh in
    /// preference to asking git's credential helpers.
    pub authorization: Option<String>,
    /// Upload actions of a git-xet server: how many still-uploading xorbs a shard may name
    /// ([`HEADER_AWAIT_XORBS_LIMIT`]; `None` when not said or not a number: learnt from
    /// the first upload answer instead).
    pub await_xorbs_limit: Option<usize>,
}

impl fmt::Debug for XetAction {
    // By hand, so that the token never reaches a log through `{:?}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("XetAction")
            .field("cas_url", &self.cas_url)
            .field("access_token", &"<redacted>")
            .field("token_expiration", &self.token_expiration)
            .field("session_id", &self.session_id)
            .field("refresh_url", &self.refresh_url)
            .field("file_hash", &self.file_hash)
            .field("await_xorbs_limit", &self.await_xorbs_limit)
            .finish()
    }
}

impl XetAction {
    /// Reads the action of an `operation` request. Missing or malformed headers are errors
    /// that say which header and suggest the likely cause.
    pub fn from_action(
        action: Option<&Action>,
        operation: Operation,
    ) -> Result<XetAction, LfsError> {
        let action = action.ok_or_else(|| {
            LfsError::Action(
                "no action for this object (is the LFS server offering the `xet` transfer? \
                 `git xet status` shows what it offers)"
                    .into(),
            )
        })?;
        let required = |name: &str| {
            action
                .header(name)
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| LfsError::Action(format!("header {name} is missing")))
        };
        let cas_url = required(HEADER_CAS_URL)?.trim_end_matches('/').to_string();
        if !(cas_url.starts_with("http://") || cas_url.starts_with("https://")) {
            return Err(LfsError::Action(format!(
                "{HEADER_CAS_URL} {cas_url:?} is not an http(s) URL"
            )));
        }
        let access_token = required(HEADER_ACCESS_TOKEN)?.to_string();
        let expiration = required(HEADER_TOKEN_EXPIRATION)?;
        let token_expiration = expiration.parse::<u64>().map_err(|_| {
            LfsError::Action(format!(
                "{HEADER_TOKEN_EXPIRATION} {expiration:?} is not unix seconds"
            ))
        })?;
        let file_hash = match (operation, action.header(HEADER_FILE_HASH)) {
            (Operation::Download, None) => {
                return Err(LfsError::Action(format!(
                    "header {HEADER_FILE_HASH} is missing on a download action"
                )))
            }
            (_, Some(h)) => Some(
                MerkleHash::from_hex(h.trim())
                    .map_err(|e| LfsError::Action(format!("header {HEADER_FILE_HASH}: {e}")))?,
            ),
            (Operation::Upload, None) => None,
        };
        Ok(XetAction {
            cas_url,
            access_token,
            token_expiration,
            session_id: action.header(HEADER_SESSION_ID).map(str::to_string),
            refresh_url: action.href.trim().to_string(),
            file_hash,
            authorization: action.header("Authorization").map(str::to_string),
            await_xorbs_limit: action
                .header(HEADER_AWAIT_XORBS_LIMIT)
                .and_then(|v| v.trim().parse().ok()),
        })
    }
}

/// The JSON the token-refresh URL answers (the server's own type: one definition).
pub type RefreshedToken = git_xet_core::api::cas::XetTokenResponse;

#[cfg(test)]
mod tests {
    use super::*;

    fn action(headers: &[(&str, &str)]) -> Action {
        Action {
            href: "http://h/org/r.git/info/lfs/xet-token".into(),
            header: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    const HASH: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn full() -> Vec<(&'static str, &'static str)> {
        vec![
            ("x-xet-cas-url", "http://127.0.0.1:9/"),
            ("X-Xet-Access-Token", "tok"),
            ("X-Xet-Token-Expiration", "1700000000"),
            ("X-Xet-Session-Id", "s1"),
            ("X-Xet-Hash", HASH),
        ]
    }

    #[test]
    fn reads_every_header() {
        let a = XetAction::from_action(Some(&action(&full())), Operation::Download).unwrap();
        assert_eq!(a.cas_url, "http://127.0.0.1:9");
        assert_eq!(a.access_token, "tok");
        assert_eq!(a.token_expiration, 1_700_000_000);
        assert_eq!(a.session_id.as_deref(), Some("s1"));
        assert_eq!(a.file_hash.unwrap().to_hex(), HASH);
        assert_eq!(a.refresh_url, "http://h/org/r.git/info/lfs/xet-token");
        assert_eq!(a.await_xorbs_limit, None, "an older server's action");
        assert!(!format!("{a:?}").contains("tok\""));
        let mut headers = full();
        headers.push(("x-xet-await-xorbs-limit", " 16 "));
        let a = XetAction::from_action(Some(&action(&headers)), Operation::Upload).unwrap();
        assert_eq!(a.await_xorbs_limit, Some(16));
        headers.last_mut().unwrap().1 = "many";
        let a = XetAction::from_action(Some(&action(&headers)), Operation::Upload).unwrap();
        assert_eq!(a.await_xorbs_limit, None, "not a number: learnt as before");
    }

    #[test]
    fn explains_what_is_missing() {
        let err = XetAction::from_action(None, Operation::Upload)
            .unwrap_err()
            .to_string();
        assert!(err.contains("offering the `xet` transfer"), "{err}");
        for (drop, expected) in [
            ("x-xet-cas-url", "X-Xet-Cas-Url is missing"),
            ("X-Xet-Access-Token", "X-Xet-Access-Token is missing"),
            (
                "X-Xet-Token-Expiration",
                "X-Xet-Token-Expiration is missing",
            ),
            ("X-Xet-Hash", "X-Xet-Hash is missing"),
        ] {
            let headers: Vec<_> = full().into_iter().filter(|(k, _)| *k != drop).collect();
            let err = XetAction::from_action(Some(&action(&headers)), Operation::Download)
                .unwrap_err()
                .to_string();
            assert!(err.contains(expected), "{err}");
        }
        let mut headers = full();
        headers[2].1 = "soon";
        let err = XetAction::from_action(Some(&action(&headers)), Operation::Upload)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not unix seconds"), "{err}");
        headers = full();
        headers[4].1 = "xyz";
        assert!(XetAction::from_action(Some(&action(&headers)), Operation::Download).is_err());
        headers = full();
        headers[0].1 = "file:///etc";
        assert!(XetAction::from_action(Some(&action(&headers)), Operation::Upload).is_err());
    }

    #[test]
    fn upload_actions_need_no_file_hash() {
        let headers: Vec<_> = full()
            .into_iter()
            .filter(|(k, _)| *k != "X-Xet-Hash")
            .collect();
        assert!(
            XetAction::from_action(Some(&action(&headers)), Operation::Upload)
                .unwrap()
                .file_hash
                .is_none()
        );
    }
}
