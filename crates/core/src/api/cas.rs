//! The CAS API's JSON answers (docs/formats.md, "CAS HTTP API"), as hf-xet and the reference
//! server spell them; and the CAS token the git-lfs API's `xet-*-token` routes hand out.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Request header of `POST /v1/shards`: comma-separated hex hashes of xorbs still being
/// uploaded, which the server waits for before validating the shard (a git-xet server
/// extension: docs/server-api.md, "Pipelined shard uploads").
pub const AWAIT_XORBS: &str = "x-xet-await-xorbs";
/// Response header of the xorb and shard uploads of a server that honours [`AWAIT_XORBS`]:
/// how many xorbs one shard may name. Other servers never send it and are never sent
/// [`AWAIT_XORBS`]. A git-xet server's `xet` upload actions carry it too, under
/// [`crate::lfs::HEADER_AWAIT_XORBS_LIMIT`].
pub const AWAIT_XORBS_LIMIT: &str = "x-xet-await-xorbs-limit";

/// The answer to `GET /v1/upload-batches/{session}` (a git-xet server extension): the
/// objects the upload Batch API answer of that session id gave `xet` actions, so that a
/// client can read ahead of what git-lfs hands its agents one by one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadBatchAnswer {
    pub objects: Vec<AnnouncedObject>,
}

/// One object of an [`UploadBatchAnswer`]: its sha256 (hex) and size, as the Batch API
/// request named it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnnouncedObject {
    pub oid: String,
    pub size: u64,
}

/// The answer to `POST /v1/xorbs/default/{hash}`: `{"was_inserted":true}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadXorbResponse {
    /// False when the server already held the xorb.
    pub was_inserted: bool,
}

/// The answer to `POST /v1/shards`: `{"result":1}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadShardResponse {
    pub result: ShardResult,
}

/// What registering a shard did; a number on the wire (hf-xet's `UploadShardResponseType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardResult {
    /// `0`: every file it registers was registered already.
    Exists,
    /// `1`: something new was registered.
    SyncPerformed,
}

impl ShardResult {
    pub fn from_changed(changed: bool) -> Self {
        if changed {
            ShardResult::SyncPerformed
        } else {
            ShardResult::Exists
        }
    }

    pub fn changed(self) -> bool {
        self == ShardResult::SyncPerformed
    }
}

impl Serialize for ShardResult {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u8(match self {
            ShardResult::Exists => 0,
            ShardResult::SyncPerformed => 1,
        })
    }
}

impl<'de> Deserialize<'de> for ShardResult {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match u8::deserialize(d)? {
            0 => Ok(ShardResult::Exists),
            1 => Ok(ShardResult::SyncPerformed),
            n => Err(serde::de::Error::custom(format!(
                "unknown shard upload result {n} (expected 0 or 1)"
            ))),
        }
    }
}

/// One line of the NDJSON answer to `POST /v2/shards` (hf-xet 1.8: `type`-tagged, snake
/// case); the last is `{"type":"result"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ShardUploadFrame {
    Validating { verified: u64, total: u64 },
    Committing { stage: CommitStage },
    Result,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommitStage {
    Uploading,
    Syncing,
}

/// The answer of `GET <repo>.git/info/lfs/xet-read-token` (and `xet-write-token`): a CAS
/// token, its expiry in unix seconds and the CAS URL it is for.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct XetTokenResponse {
    #[serde(rename = "accessToken")]
    pub access_token: String,
    #[serde(rename = "casUrl")]
    pub cas_url: String,
    pub exp: u64,
}

/// Tokens never reach logs.
impl fmt::Debug for XetTokenResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("XetTokenResponse")
            .field("access_token", &"<redacted>")
            .field("cas_url", &self.cas_url)
            .field("exp", &self.exp)
            .finish()
    }
}
