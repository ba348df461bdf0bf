//! The messages of git-lfs's Batch API (docs/api/batch.md in git-lfs), as serde types for
//! both sides: the client and the ssh shell's relay send [`BatchRequest`] and read
//! [`BatchResponse`]; the server reads the one and writes the other. No I/O here.
//!
//! Wire rules kept by these types:
//! - fields are written in the order git-lfs's documentation shows them, and optional fields
//!   that are `None` (or empty header/action maps) are left out, not written as `null`;
//! - reading is as lenient as git-lfs's own (Go) decoder where a server may omit something:
//!   a missing `transfer`, `size`, `href`, `header`, `code` or `message` takes its default,
//!   and a `null` `actions` or `ref` is the same as none. Required are only what a request
//!   cannot do without: `operation`, `objects` and each object's `oid` and `size`.
//! - sizes are signed, so that a server can answer a negative size with a per-object error
//!   instead of refusing the whole request (the documentation says "at least zero").

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The `hash_algo` git-lfs names objects with (and the only one this project supports).
pub const HASH_ALGO_SHA256: &str = "sha256";

/// The direction of a batch request, and of a custom-transfer session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    Upload,
    Download,
}

impl Operation {
    /// The name on the wire, also the name of the action that moves the object.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Upload => "upload",
            Operation::Download => "download",
        }
    }

    /// The operation named `name` (exactly as on the wire).
    pub fn from_name(name: &str) -> Option<Operation> {
        match name {
            "upload" => Some(Operation::Upload),
            "download" => Some(Operation::Download),
            _ => None,
        }
    }
}

impl Serialize for Operation {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Operation {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Operation, D::Error> {
        let name = String::deserialize(deserializer)?;
        Operation::from_name(&name).ok_or_else(|| {
            let shown: String = name.chars().take(80).collect();
            serde::de::Error::custom(format!("unknown operation {shown:?}"))
        })
    }
}

/// `POST .../objects/batch`: the objects a client wants to move.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchRequest {
    pub operation: Operation,
    /// The transfer adapters the client offers; none means `basic`.
    #[serde(default)]
    pub transfers: Vec<String>,
    pub objects: Vec<ObjectSpec>,
    /// The server ref the objects belong to (git-lfs 2.4 and later).
    #[serde(
        rename = "ref",
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "null_as_default"
    )]
    pub refspec: Option<Ref>,
    /// `None` means `sha256`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_algo: Option<String>,
}

/// The `ref` of a request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ref {
    /// A fully qualified ref name (`refs/heads/main`).
    #[serde(default)]
    pub name: String,
}

/// One object of a request: its LFS oid (64 hex digits, checked by whoever uses it) and size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectSpec {
    pub oid: String,
    pub size: i64,
}

/// The server's answer to a [`BatchRequest`] that it could serve (status 200).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchResponse {
    /// The adapter the server chose; `None` means `basic`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer: Option<String>,
    #[serde(default)]
    pub objects: Vec<ObjectResponse>,
    /// `None` means `sha256`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_algo: Option<String>,
}

/// The answer for one object: actions to take, none (an upload the server already has), or
/// an error.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectResponse {
    pub oid: String,
    #[serde(default)]
    pub size: i64,
    /// Whether the actions carry their own credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authenticated: Option<bool>,
    /// By action name: `upload`, `verify` or `download`.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub actions: BTreeMap<String, Action>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ObjectError>,
}

/// How to move (or verify) one object: a request to `href` with `header`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Action {
    #[serde(default)]
    pub href: String,
    /// Header values are often credentials: never log them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub header: BTreeMap<String, String>,
    /// Seconds from now until the action expires; preferred over `expires_at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in: Option<i64>,
    /// When the action expires, as an RFC 3339 timestamp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

/// Why the server cannot serve one object; `code` is an HTTP status (404, 409, 410, 422).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectError {
    #[serde(default)]
    pub code: u32,
    #[serde(default)]
    pub message: String,
}

/// Reads `null` as the default value, as git-lfs's decoder does for maps and pointers.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;
