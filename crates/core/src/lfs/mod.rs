//! The vocabulary the `xet` transfer shares with git-lfs's Batch API, for client and server
//! alike: the Batch API messages ([`batch`]), the headers of a `xet` action (docs/formats.md,
//! "The `xet` transfer in the git-lfs Batch API"), LFS object ids, and pointer files
//! ([`pointer`]).

pub mod batch;
pub mod pointer;

/// Base URL of the CAS API.
pub const HEADER_CAS_URL: &str = "X-Xet-Cas-Url";
/// A CAS access token for the object's repository.
pub const HEADER_ACCESS_TOKEN: &str = "X-Xet-Access-Token";
/// When the token expires, in unix seconds.
pub const HEADER_TOKEN_EXPIRATION: &str = "X-Xet-Token-Expiration";
pub const HEADER_SESSION_ID: &str = "X-Xet-Session-Id";
/// Download actions: the XET file hash of the object.
pub const HEADER_FILE_HASH: &str = "X-Xet-Hash";

/// Why a string is not an LFS object id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OidError {
    #[error("oid must be 64 hex digits, got {0} characters")]
    Length(usize),
    /// A character other than `0-9a-f` (git-lfs writes lowercase only).
    #[error("oid must be lowercase hex, got {0:?}")]
    NotLowercaseHex(String),
}

/// Parses an LFS object id: a sha256 as exactly 64 lowercase hex digits, as git-lfs writes
/// them (the one parser of the client, the agent, the server and import-lfs).
pub fn parse_oid(s: &str) -> Result<[u8; 32], OidError> {
    let bytes = s.as_bytes();
    if bytes.len() != 64 {
        return Err(OidError::Length(bytes.len()));
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        match (digit(pair[0]), digit(pair[1])) {
            (Some(h), Some(l)) => *byte = h << 4 | l,
            _ => return Err(OidError::NotLowercaseHex(s.chars().take(80).collect())),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oids_are_64_lowercase_hex_digits() {
        let hex = "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393";
        let oid = parse_oid(hex).unwrap();
        assert_eq!(crate::hash::sha256_hex(&oid), hex);
        assert_eq!(parse_oid(&hex[..63]), Err(OidError::Length(63)));
        assert!(matches!(
            parse_oid(&hex.to_uppercase()),
            Err(OidError::NotLowercaseHex(_))
        ));
        let mut bad = hex.to_string();
        bad.replace_range(10..11, "g");
        assert!(matches!(parse_oid(&bad), Err(OidError::NotLowercaseHex(_))));
        // Multi-byte characters of the right byte length are rejected, not split.
        assert!(parse_oid(&"é".repeat(32)).is_err());
    }
}
