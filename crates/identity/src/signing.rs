//! Signed, expiring URLs for xorb data:
//! `{base}/v1/xorb-data/{hash}?bytes=S-E&tid=ID&expires=T&sig=SIG`; and for basic uploads
//! (see [`UploadGrant`]).
//!
//! Reconstruction answers hand these out after checking the caller may read the file, so the
//! data route itself needs no token (like a pre-signed object-store URL). What a URL grants is
//! exactly what the reconstruction authorized: the byte range `S-E` (inclusive, as in
//! `Range` headers) of one xorb, for the token `ID` (empty for anonymous reads) until `T`.
//! All of it is under the signature (keyed BLAKE3), so a URL cannot be widened to the rest of
//! a xorb that global dedup shares with other repositories' files, and revoking the token
//! ends its URLs (the data route checks `ID`).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use crate::error::AuthError;
use crate::keys::Keys;
use git_xet_core::api::routes;
use git_xet_core::reconstruction::HttpRange;
use git_xet_core::MerkleHash;

/// What a fetch URL grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub xorb: MerkleHash,
    /// Inclusive byte range of the stored xorb.
    pub bytes: HttpRange,
    /// The id of the token the reconstruction was answered for; empty for anonymous reads.
    pub token_id: String,
    /// Unix seconds.
    pub expires: u64,
}

impl Signed for Grant {
    fn payload(&self) -> String {
        format!(
            "xorb-data\n{}\n{}-{}\n{}\n{}",
            self.xorb, self.bytes.start, self.bytes.end, self.token_id, self.expires
        )
    }
}

/// A grant a URL carries under its signature (keyed BLAKE3 of the payload, which starts
/// with the kind, so one kind's signature never verifies as another's).
trait Signed {
    fn payload(&self) -> String;

    fn sig(&self, keys: &Keys) -> blake3::Hash {
        keys.url_mac(self.payload().as_bytes())
    }

    /// The signature as its query parameter carries it.
    fn encoded_sig(&self, keys: &Keys) -> String {
        URL_SAFE_NO_PAD.encode(self.sig(keys).as_bytes())
    }
}

/// What verifying any signed URL checks once its own fields are parsed: `expires` and
/// `sig` well-formed, `sig` the signature of the grant `grant(expires)` makes (compared in
/// constant time: blake3::Hash's `==`), and not expired at `now`. `forbidden` words the
/// refusal for the URL's kind.
fn verify_signed<G: Signed>(
    keys: &Keys,
    expires: &str,
    sig: &str,
    now: u64,
    forbidden: impl Fn(&str) -> AuthError,
    grant: impl FnOnce(u64) -> G,
) -> Result<G, AuthError> {
    let expires: u64 = expires.parse().map_err(|_| forbidden("is malformed"))?;
    let sig: [u8; 32] = URL_SAFE_NO_PAD
        .decode(sig)
        .ok()
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| forbidden("has a malformed signature"))?;
    let grant = grant(expires);
    if grant.sig(keys) != blake3::Hash::from(sig) {
        return Err(forbidden("has an invalid signature"));
    }
    if expires <= now {
        return Err(forbidden("has expired"));
    }
    Ok(grant)
}

/// A URL for the bytes `grant` names.
pub fn fetch_url(keys: &Keys, base: &str, grant: &Grant) -> String {
    let sig = grant.encoded_sig(keys);
    let Grant {
        xorb,
        bytes,
        token_id,
        expires,
    } = grant;
    format!(
        "{base}{}?bytes={}-{}&tid={token_id}&expires={expires}&sig={sig}",
        routes::xorb_data_path(xorb),
        bytes.start,
        bytes.end
    )
}

/// Query parameters of a fetch URL.
#[derive(Debug, Default, serde::Deserialize)]
pub struct FetchQuery {
    pub bytes: Option<String>,
    pub tid: Option<String>,
    pub expires: Option<String>,
    pub sig: Option<String>,
}

/// Checks a fetch URL's signature and expiry and returns what it grants: 403 when tampered
/// with or expired. The caller checks the token id against revocations and the request's
/// `Range` against the granted bytes.
pub fn verify(
    keys: &Keys,
    xorb: &MerkleHash,
    query: &FetchQuery,
    now: u64,
) -> Result<Grant, AuthError> {
    let forbidden = |why: &str| {
        AuthError::Forbidden(format!("xorb data URL {why}; ask for a new reconstruction"))
    };
    let (Some(bytes), Some(expires), Some(sig)) = (&query.bytes, &query.expires, &query.sig) else {
        return Err(forbidden(
            "is not signed for a byte range (made by an older server?)",
        ));
    };
    let bytes = bytes
        .split_once('-')
        .and_then(|(s, e)| Some((s.parse::<u64>().ok()?, e.parse::<u64>().ok()?)))
        .filter(|(s, e)| s <= e)
        .map(|(start, end)| HttpRange { start, end })
        .ok_or_else(|| forbidden("has a malformed byte range"))?;
    verify_signed(keys, expires, sig, now, forbidden, |expires| Grant {
        xorb: *xorb,
        bytes,
        token_id: query.tid.clone().unwrap_or_default(),
        expires,
    })
}

/// What a signed basic-upload href grants: `PUT` of one object into one repository, for the
/// token `ID` (empty without one) until `T`. huggingface_hub (`HF_HUB_DISABLE_XET=1`) PUTs to
/// an upload action's href alone, as to a pre-signed object-store URL, without the action's
/// headers; the href then carries its grant as `?tid=ID&expires=T&sig=SIG`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadGrant {
    pub repo: String,
    pub oid: String,
    pub token_id: String,
    pub expires: u64,
}

impl Signed for UploadGrant {
    fn payload(&self) -> String {
        format!(
            "lfs-upload\n{}\n{}\n{}\n{}",
            self.repo, self.oid, self.token_id, self.expires
        )
    }
}

impl UploadGrant {
    /// The query string that carries this grant.
    pub fn query(&self, keys: &Keys) -> String {
        let sig = self.encoded_sig(keys);
        format!("tid={}&expires={}&sig={sig}", self.token_id, self.expires)
    }
}

/// Checks the grant in a basic-upload href's query for `oid` in `repo`: 403 when tampered
/// with, for another object or repository, or expired. The caller checks the token id
/// against revocations.
pub fn verify_upload(
    keys: &Keys,
    repo: &str,
    oid: &str,
    query: &str,
    now: u64,
) -> Result<UploadGrant, AuthError> {
    let forbidden = |why: &str| {
        AuthError::Forbidden(format!(
            "this upload URL {why}; ask the Batch API for a new upload action"
        ))
    };
    let param = |key: &str| {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
    };
    let (Some(expires), Some(sig)) = (param("expires"), param("sig")) else {
        return Err(forbidden("is not signed"));
    };
    verify_signed(keys, expires, sig, now, forbidden, |expires| UploadGrant {
        repo: repo.to_string(),
        oid: oid.to_string(),
        token_id: param("tid").unwrap_or_default().to_string(),
        expires,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query_of(url: &str) -> FetchQuery {
        let q = url.split_once('?').unwrap().1;
        let mut out = FetchQuery::default();
        for pair in q.split('&') {
            let (k, v) = pair.split_once('=').unwrap();
            let v = Some(v.to_string());
            match k {
                "bytes" => out.bytes = v,
                "tid" => out.tid = v,
                "expires" => out.expires = v,
                "sig" => out.sig = v,
                _ => {}
            }
        }
        out
    }

    fn grant(xorb: MerkleHash) -> Grant {
        Grant {
            xorb,
            bytes: HttpRange { start: 10, end: 99 },
            token_id: "t1".into(),
            expires: 1000,
        }
    }

    #[test]
    fn urls_verify_until_they_expire_and_cannot_be_widened() {
        let keys = Keys::from_secret(&[1; 32]);
        let xorb = MerkleHash::from_bytes([9; 32]);
        let url = fetch_url(&keys, "http://h", &grant(xorb));
        assert!(url.starts_with(&format!("http://h/v1/xorb-data/{xorb}?")));
        let q = query_of(&url);
        assert_eq!(verify(&keys, &xorb, &q, 999).unwrap(), grant(xorb));
        assert!(verify(&keys, &xorb, &q, 1000).is_err());
        assert!(
            verify(&keys, &MerkleHash::from_bytes([8; 32]), &q, 0).is_err(),
            "other xorb"
        );
        let tampered = |f: &dyn Fn(&mut FetchQuery)| {
            let mut q = query_of(&url);
            f(&mut q);
            verify(&keys, &xorb, &q, 0)
        };
        assert!(tampered(&|q| q.expires = Some("2000".into())).is_err());
        assert!(tampered(&|q| q.bytes = Some("0-99".into())).is_err());
        assert!(tampered(&|q| q.bytes = Some("10-100".into())).is_err());
        assert!(tampered(&|q| q.bytes = Some("99-10".into())).is_err());
        assert!(tampered(&|q| q.bytes = None).is_err());
        assert!(tampered(&|q| q.tid = Some("t2".into())).is_err());
        assert!(tampered(&|q| q.tid = None).is_err());
        assert!(verify(&keys, &xorb, &FetchQuery::default(), 0).is_err());
    }

    #[test]
    fn upload_grants_verify_for_their_object_repository_and_time_only() {
        let keys = Keys::from_secret(&[1; 32]);
        let grant = UploadGrant {
            repo: "org/m".into(),
            oid: "ab".repeat(32),
            token_id: "t1".into(),
            expires: 1000,
        };
        let q = grant.query(&keys);
        assert_eq!(
            verify_upload(&keys, "org/m", &grant.oid, &q, 999).unwrap(),
            grant
        );
        for (repo, oid, query, now) in [
            ("org/other", grant.oid.clone(), q.clone(), 999),
            ("org/m", "cd".repeat(32), q.clone(), 999),
            ("org/m", grant.oid.clone(), q.clone(), 1000),
            (
                "org/m",
                grant.oid.clone(),
                q.replace("tid=t1", "tid=t2"),
                999,
            ),
            (
                "org/m",
                grant.oid.clone(),
                q.replace("expires=1000", "expires=9999"),
                999,
            ),
            (
                "org/m",
                grant.oid.clone(),
                "tid=t1&expires=1000".into(),
                999,
            ),
            (
                "org/m",
                grant.oid.clone(),
                "tid=t1&expires=x&sig=%%".into(),
                999,
            ),
        ] {
            assert!(
                matches!(
                    verify_upload(&keys, repo, &oid, &query, now),
                    Err(AuthError::Forbidden(_))
                ),
                "{repo} {oid} {query} {now}"
            );
        }
    }
}
