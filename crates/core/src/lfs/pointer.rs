//! git-lfs pointer files (docs/spec.md in git-lfs): strict parsing and canonical writing.
//!
//! ```text
//! version https://git-lfs.github.com/spec/v1
//! oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393
//! size 12345
//! ```
//! Lines are `key value\n`, `version` first, the other keys in ascending order, keys from
//! `[a-z0-9.-]`. Unknown keys are preserved (the spec requires it). A pointer is at most
//! 1024 bytes, the size git-lfs itself reads before deciding a blob is not a pointer.

use std::fmt;
use std::str::FromStr;

/// A pointer file that does not follow the git-lfs pointer specification: the reason says
/// which rule it breaks (git-lfs shows it to the user as it is).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid LFS pointer: {reason}")]
pub struct PointerError {
    pub reason: String,
}

/// The version URL git-lfs writes.
pub const VERSION_V1: &str = "https://git-lfs.github.com/spec/v1";
/// The pre-release version URL, still readable.
pub const VERSION_HAWSER: &str = "https://hawser.github.com/spec/v1";
/// Blobs larger than this are never pointers.
pub const MAX_POINTER_SIZE: usize = 1024;

/// An LFS object id: the sha256 of the content.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Oid(pub [u8; 32]);

impl Oid {
    /// The oid of `data`.
    pub fn of(data: &[u8]) -> Oid {
        use sha2::Digest;
        Oid(sha2::Sha256::digest(data).into())
    }

    pub fn to_hex(&self) -> String {
        crate::hex::encode_lower(&self.0)
    }

    /// The object's path under an LFS storage directory: `ab/cd/abcd...`.
    pub fn storage_path(&self) -> String {
        let hex = self.to_hex();
        format!("{}/{}/{}", &hex[0..2], &hex[2..4], hex)
    }
}

impl FromStr for Oid {
    type Err = PointerError;

    /// Exactly 64 lowercase hex digits, as git-lfs writes them.
    fn from_str(s: &str) -> Result<Oid, PointerError> {
        crate::lfs::parse_oid(s).map(Oid).map_err(|e| PointerError {
            reason: e.to_string(),
        })
    }
}

impl fmt::Display for Oid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Oid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Oid({})", self.to_hex())
    }
}

/// A parsed pointer file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pointer {
    pub oid: Oid,
    pub size: u64,
    /// Keys other than version/oid/size (e.g. `ext-0-foo`), in file order, kept on rewrite.
    pub extra: Vec<(String, String)>,
}

impl Pointer {
    pub fn new(oid: Oid, size: u64) -> Pointer {
        Pointer {
            oid,
            size,
            extra: Vec::new(),
        }
    }

    /// Parses a pointer strictly. Anything that is not exactly a pointer is an error.
    pub fn parse(bytes: &[u8]) -> Result<Pointer, PointerError> {
        let bad = |reason: String| PointerError { reason };
        if bytes.len() > MAX_POINTER_SIZE {
            return Err(bad(format!(
                "{} bytes is larger than a pointer can be ({MAX_POINTER_SIZE})",
                bytes.len()
            )));
        }
        let text = std::str::from_utf8(bytes).map_err(|_| bad("not UTF-8".into()))?;
        if text.is_empty() {
            return Err(bad("empty".into()));
        }
        let body = text
            .strip_suffix('\n')
            .ok_or_else(|| bad("missing final newline".into()))?;
        let mut version = None;
        let mut oid = None;
        let mut size = None;
        let mut extra = Vec::new();
        let mut previous_key: Option<&str> = None;
        for (n, line) in body.split('\n').enumerate() {
            let (key, value) = line
                .split_once(' ')
                .ok_or_else(|| bad(format!("line {} is not `key value`", n + 1)))?;
            if key.is_empty()
                || !key
                    .bytes()
                    .all(|c| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-'))
            {
                return Err(bad(format!(
                    "line {}: invalid key {:?}",
                    n + 1,
                    truncate_for_message(key)
                )));
            }
            if value.contains('\r') {
                return Err(bad(format!("line {}: carriage return in value", n + 1)));
            }
            if n == 0 {
                if key != "version" {
                    return Err(bad("the first key must be `version`".into()));
                }
                version = Some(value);
                continue;
            }
            if let Some(prev) = previous_key {
                if key <= prev {
                    return Err(bad(format!(
                        "keys out of order or repeated: `{key}` after `{prev}`"
                    )));
                }
            }
            previous_key = Some(key);
            match key {
                "version" => return Err(bad("`version` appears twice".into())),
                "oid" => {
                    let hex = value.strip_prefix("sha256:").ok_or_else(|| {
                        bad(format!(
                            "oid must be `sha256:<hex>`, got {:?}",
                            truncate_for_message(value)
                        ))
                    })?;
                    oid = Some(hex.parse::<Oid>()?);
                }
                "size" => {
                    size = Some(
                        parse_size(value).ok_or_else(|| bad(format!("invalid size {value:?}")))?,
                    )
                }
                _ => extra.push((key.to_string(), value.to_string())),
            }
        }
        match version {
            Some(VERSION_V1) | Some(VERSION_HAWSER) => {}
            Some(other) => {
                return Err(bad(format!(
                    "unknown version {:?}",
                    truncate_for_message(other)
                )))
            }
            None => return Err(bad("missing version".into())),
        }
        Ok(Pointer {
            oid: oid.ok_or_else(|| bad("missing oid".into()))?,
            size: size.ok_or_else(|| bad("missing size".into()))?,
            extra,
        })
    }

    /// Parses `bytes` when it looks like a pointer, `None` for ordinary content.
    pub fn detect(bytes: &[u8]) -> Option<Pointer> {
        Pointer::parse(bytes).ok()
    }

    /// The canonical text, byte-identical to what `git lfs pointer` writes.
    pub fn to_text(&self) -> String {
        let mut lines: Vec<(String, String)> = vec![
            ("oid".into(), format!("sha256:{}", self.oid)),
            ("size".into(), self.size.to_string()),
        ];
        lines.extend(self.extra.iter().cloned());
        lines.sort();
        let mut out = format!("version {VERSION_V1}\n");
        for (k, v) in lines {
            out.push_str(&k);
            out.push(' ');
            out.push_str(&v);
            out.push('\n');
        }
        out
    }
}

/// Decimal digits only, no sign, no leading zeros (except `0` itself), fits u64.
fn parse_size(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) || (s.len() > 1 && s.starts_with('0'))
    {
        return None;
    }
    s.parse().ok()
}

fn truncate_for_message(s: &str) -> String {
    s.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const OID: &str = "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393";

    fn text(oid: &str, size: &str) -> String {
        format!("version {VERSION_V1}\noid sha256:{oid}\nsize {size}\n")
    }

    #[test]
    fn parses_and_rewrites_the_spec_example() {
        let t = text(OID, "12345");
        let p = Pointer::parse(t.as_bytes()).unwrap();
        assert_eq!(p.oid.to_hex(), OID);
        assert_eq!(p.size, 12345);
        assert_eq!(p.to_text(), t);
        assert_eq!(p.oid.storage_path(), format!("4d/7a/{OID}"));
    }

    #[test]
    fn reads_the_hawser_version_and_writes_v1() {
        let t = format!("version {VERSION_HAWSER}\noid sha256:{OID}\nsize 1\n");
        let p = Pointer::parse(t.as_bytes()).unwrap();
        assert_eq!(p.to_text(), text(OID, "1"));
    }

    #[test]
    fn preserves_unknown_keys_in_order() {
        let t = format!(
            "version {VERSION_V1}\next-0-foo sha256:{OID}\noid sha256:{OID}\nsize 7\nzzz x\n"
        );
        let p = Pointer::parse(t.as_bytes()).unwrap();
        assert_eq!(p.extra.len(), 2);
        assert_eq!(p.to_text(), t);
    }

    #[test]
    fn rejects_everything_that_is_not_exactly_a_pointer() {
        let cases: Vec<(String, &str)> = vec![
            (String::new(), "empty"),
            (text(OID, "12").trim_end().to_string(), "final newline"),
            (text(&OID.to_uppercase(), "12"), "lowercase hex"),
            (text(&OID[..63], "12"), "64 hex digits"),
            (text(OID, "-1"), "invalid size"),
            (text(OID, "+1"), "invalid size"),
            (text(OID, "012"), "invalid size"),
            (text(OID, "18446744073709551616"), "invalid size"),
            (
                format!("oid sha256:{OID}\nversion {VERSION_V1}\nsize 1\n"),
                "first key",
            ),
            (
                format!("version {VERSION_V1}\nsize 1\noid sha256:{OID}\n"),
                "out of order",
            ),
            (
                format!("version {VERSION_V1}\noid sha256:{OID}\noid sha256:{OID}\nsize 1\n"),
                "repeated",
            ),
            (
                format!("version {VERSION_V1}\noid md5:{OID}\nsize 1\n"),
                "sha256:",
            ),
            (format!("version {VERSION_V1}\nsize 1\n"), "missing oid"),
            (
                format!("version {VERSION_V1}\noid sha256:{OID}\n"),
                "missing size",
            ),
            (
                format!("version https://example.com/v9\noid sha256:{OID}\nsize 1\n"),
                "unknown version",
            ),
            (
                format!("version {VERSION_V1}\r\noid sha256:{OID}\nsize 1\n"),
                "carriage return",
            ),
            (
                format!("version {VERSION_V1}\nOid sha256:{OID}\nsize 1\n"),
                "invalid key",
            ),
            (
                format!("version {VERSION_V1}\noid  sha256:{OID}\nsize 1\n"),
                "sha256:",
            ),
            ("x".repeat(2000), "larger than a pointer"),
        ];
        for (input, expected) in cases {
            let err = Pointer::parse(input.as_bytes()).unwrap_err().to_string();
            assert!(
                err.contains(expected),
                "{input:?}: {err} (expected {expected:?})"
            );
        }
        assert!(Pointer::parse(&[0xff, 0xfe, b'\n']).is_err());
    }

    #[test]
    fn oid_of_content_matches_sha256() {
        assert_eq!(
            Oid::of(b"").to_hex(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
