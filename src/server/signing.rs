//! Signed, expiring URLs for xorb data: `{base}/v1/xorb-data/{hash}?expires=T&sig=S`.
//!
//! Reconstruction answers hand these out after checking the caller may read the file, so the
//! data route itself needs no token (like a pre-signed object-store URL). The signature is
//! keyed BLAKE3 over the xorb hash and the expiry.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use crate::server::error::{ServerError, ServerResult};
use crate::server::keys::Keys;
use crate::xet::MerkleHash;

pub const XORB_DATA_PATH: &str = "/v1/xorb-data";

fn signed_payload(xorb: &MerkleHash, expires: u64) -> String {
    format!("xorb-data\n{xorb}\n{expires}")
}

/// A URL for the data of `xorb`, valid until `expires` (unix seconds).
pub fn fetch_url(keys: &Keys, base: &str, xorb: &MerkleHash, expires: u64) -> String {
    let sig = URL_SAFE_NO_PAD.encode(
        keys.url_mac(signed_payload(xorb, expires).as_bytes())
            .as_bytes(),
    );
    format!("{base}{XORB_DATA_PATH}/{xorb}?expires={expires}&sig={sig}")
}

/// Query parameters of a fetch URL.
#[derive(Debug, Default, serde::Deserialize)]
pub struct FetchQuery {
    pub expires: Option<String>,
    pub sig: Option<String>,
}

/// Checks a fetch URL's signature and expiry: 403 when tampered with or expired.
pub fn verify(keys: &Keys, xorb: &MerkleHash, query: &FetchQuery, now: u64) -> ServerResult<()> {
    let forbidden = |why: &str| {
        ServerError::Forbidden(format!("xorb data URL {why}; ask for a new reconstruction"))
    };
    let (Some(expires), Some(sig)) = (&query.expires, &query.sig) else {
        return Err(forbidden("is not signed"));
    };
    let expires: u64 = expires.parse().map_err(|_| forbidden("is malformed"))?;
    let sig: [u8; 32] = URL_SAFE_NO_PAD
        .decode(sig)
        .ok()
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| forbidden("has a malformed signature"))?;
    // blake3::Hash compares in constant time.
    if keys.url_mac(signed_payload(xorb, expires).as_bytes()) != blake3::Hash::from(sig) {
        return Err(forbidden("has an invalid signature"));
    }
    if expires <= now {
        return Err(forbidden("has expired"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query_of(url: &str) -> FetchQuery {
        let q = url.split_once('?').unwrap().1;
        let mut out = FetchQuery::default();
        for pair in q.split('&') {
            let (k, v) = pair.split_once('=').unwrap();
            match k {
                "expires" => out.expires = Some(v.into()),
                "sig" => out.sig = Some(v.into()),
                _ => {}
            }
        }
        out
    }

    #[test]
    fn urls_verify_until_they_expire() {
        let keys = Keys::from_secret(&[1; 32]);
        let xorb = MerkleHash::from_bytes([9; 32]);
        let url = fetch_url(&keys, "http://h", &xorb, 1000);
        assert!(url.starts_with(&format!("http://h/v1/xorb-data/{xorb}?")));
        let q = query_of(&url);
        assert!(verify(&keys, &xorb, &q, 999).is_ok());
        assert!(verify(&keys, &xorb, &q, 1000).is_err());
        assert!(
            verify(&keys, &MerkleHash::from_bytes([8; 32]), &q, 0).is_err(),
            "other xorb"
        );
        let later = FetchQuery {
            expires: Some("2000".into()),
            sig: q.sig.clone(),
        };
        assert!(verify(&keys, &xorb, &later, 0).is_err(), "extended expiry");
        assert!(verify(&keys, &xorb, &FetchQuery::default(), 0).is_err());
    }
}
