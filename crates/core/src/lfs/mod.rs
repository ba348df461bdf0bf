//! The vocabulary the `xet` transfer shares with git-lfs's Batch API, for client and server
//! alike: the Batch API messages ([`batch`]), the headers of a `xet` action (docs/formats.md,
//! "The `xet` transfer in the git-lfs Batch API"), LFS object ids, and pointer files
//! ([`pointer`]).

pub mod batch;
pub mod pointer;

pub use pointer::Oid;

/// Base URL of the CAS API.
pub const HEADER_CAS_URL: &str = "X-Xet-Cas-Url";
/// A CAS access token for the object's repository.
pub const HEADER_ACCESS_TOKEN: &str = "X-Xet-Access-Token";
/// When the token expires, in unix seconds.
pub const HEADER_TOKEN_EXPIRATION: &str = "X-Xet-Token-Expiration";
pub const HEADER_SESSION_ID: &str = "X-Xet-Session-Id";
/// Download actions: the XET file hash of the object.
pub const HEADER_FILE_HASH: &str = "X-Xet-Hash";
/// Upload actions of a git-xet server that honours pipelined shard uploads: how many
/// still-uploading xorbs one shard may name ([`crate::api::cas::AWAIT_XORBS_LIMIT`] of the CAS
/// upload answers, spelt as the other action headers are, said up front so that a client's
/// first upload needs one round trip, not two).
pub const HEADER_AWAIT_XORBS_LIMIT: &str = "X-Xet-Await-Xorbs-Limit";
/// Upload actions of a git-xet server, on the first few objects of an answer only: every
/// object of the answer given a `xet` upload action, as `oid:size` separated by single
/// spaces ([`format_upload_objects`], [`parse_upload_objects`]). The same list as
/// `GET /v1/upload-batches/{session}` answers, without that round trip: git-lfs hands each
/// agent one object and waits, and a client reads ahead of it with this.
pub const HEADER_UPLOAD_OBJECTS: &str = "X-Xet-Upload-Objects";
/// At most this many objects in [`HEADER_UPLOAD_OBJECTS`] (git-lfs asks for 100 per answer).
pub const MAX_UPLOAD_OBJECTS: usize = 200;

/// Spells `objects` for [`HEADER_UPLOAD_OBJECTS`].
pub fn format_upload_objects(objects: &[crate::api::cas::AnnouncedObject]) -> String {
    let mut out = String::with_capacity(objects.len() * 76);
    for (i, object) in objects.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&object.oid);
        out.push(':');
        out.push_str(&object.size.to_string());
    }
    out
}

/// Reads a [`HEADER_UPLOAD_OBJECTS`] value: `None` when any entry is malformed (a bad oid or
/// size) or there are more than [`MAX_UPLOAD_OBJECTS`]: the list is an optimisation, and a
/// client without it does what it would do without the header.
pub fn parse_upload_objects(value: &str) -> Option<Vec<crate::api::cas::AnnouncedObject>> {
    let mut objects = Vec::new();
    for entry in value.split(' ').filter(|e| !e.is_empty()) {
        if objects.len() == MAX_UPLOAD_OBJECTS {
            return None;
        }
        let (oid, size) = entry.split_once(':')?;
        parse_oid(oid).ok()?;
        let size = size.parse::<u64>().ok()?;
        objects.push(crate::api::cas::AnnouncedObject {
            oid: oid.to_string(),
            size,
        });
    }
    Some(objects)
}

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
/// them, and nothing else (no uppercase, no surrounding space, no prefix). The one parser of
/// the client, the agent, the filter, the server and import-lfs; [`pointer::Oid`] is its
/// typed result.
pub fn parse_oid(s: &str) -> Result<[u8; 32], OidError> {
    let bytes = s.as_bytes();
    if bytes.len() != 64 {
        return Err(OidError::Length(bytes.len()));
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        match (
            crate::hex::lower_digit(pair[0]),
            crate::hex::lower_digit(pair[1]),
        ) {
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
    fn upload_object_lists_read_back_and_refuse_what_is_not_one() {
        use crate::api::cas::AnnouncedObject;
        let objects = vec![
            AnnouncedObject {
                oid: "ab".repeat(32),
                size: 0,
            },
            AnnouncedObject {
                oid: "0f".repeat(32),
                size: u64::MAX,
            },
        ];
        let value = format_upload_objects(&objects);
        assert_eq!(
            value,
            format!("{}:0 {}:{}", "ab".repeat(32), "0f".repeat(32), u64::MAX)
        );
        assert_eq!(parse_upload_objects(&value), Some(objects));
        assert_eq!(parse_upload_objects(""), Some(Vec::new()));
        let good = format!("{}:1", "ab".repeat(32));
        for bad in [
            format!("{}:1", "AB".repeat(32)),
            format!("{}:-1", "ab".repeat(32)),
            format!("{}:", "ab".repeat(32)),
            "ab".repeat(32),
            format!("{good} {}:18446744073709551616", "ab".repeat(32)),
            format!("{good} ../x:1"),
            vec![good.as_str(); MAX_UPLOAD_OBJECTS + 1].join(" "),
        ] {
            assert_eq!(parse_upload_objects(&bad), None, "{bad:.80}");
        }
        let most = vec![good.as_str(); MAX_UPLOAD_OBJECTS].join(" ");
        assert_eq!(
            parse_upload_objects(&most).map(|l| l.len()),
            Some(MAX_UPLOAD_OBJECTS)
        );
    }

    const HEX: &str = "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393";

    #[test]
    fn oids_are_exactly_64_lowercase_hex_digits() {
        let oid = parse_oid(HEX).unwrap();
        assert_eq!(crate::hash::sha256_hex(&oid), HEX);
        assert_eq!(parse_oid(&"ab".repeat(32)), Ok([0xab; 32]));
        assert_eq!(parse_oid(&"0".repeat(64)), Ok([0; 32]));
        let length = |n| Err(OidError::Length(n));
        for (text, want) in [
            ("", length(0)),
            (&HEX[..63], length(63)),
            (&format!("{HEX}0"), length(65)),
            (&format!("{HEX}.tmp"), length(68)),
            (&format!(" {HEX}"), length(65)),
            (&format!("sha256:{HEX}"), length(71)),
            // Multi-byte characters of the right byte length are rejected, not split.
            (
                &"é".repeat(32),
                Err(OidError::NotLowercaseHex("é".repeat(32))),
            ),
        ] {
            assert_eq!(parse_oid(text), want, "{text:?}");
        }
        let mut bad = Vec::new();
        for (at, c) in [
            (0, "A"),
            (10, "g"),
            (63, "F"),
            (20, " "),
            (30, "+"),
            (40, "-"),
        ] {
            let mut text = HEX.to_string();
            text.replace_range(at..at + 1, c);
            bad.push(text);
        }
        bad.push(HEX.to_uppercase());
        bad.push(format!("+{}", &HEX[1..]));
        for text in bad {
            assert!(
                matches!(parse_oid(&text), Err(OidError::NotLowercaseHex(_))),
                "{text:?}"
            );
        }
    }
}
