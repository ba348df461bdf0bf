//! git-lfs's file locking API (git-lfs's docs/api/locking.md) at `<repo>.git/info/lfs/locks`,
//! as the server answers it, the ssh shell relays it and the pre-receive hook reads it; and
//! the hook's own `info/xet/locked-paths` answer.
//!
//! Fields are declared in the order the server has always written them (alphabetical), so
//! its answers stay byte for byte what they were.

use serde::{Deserialize, Serialize};

/// A lock: `{"id","locked_at","owner":{"name"},"path"}`. `locked_at` is RFC 3339.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lock {
    pub id: String,
    pub locked_at: String,
    /// Optional in git-lfs's API; this server always names the owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<LockOwner>,
    pub path: String,
}

impl Lock {
    /// The owner's name, or "" when the server named none.
    pub fn owner_name(&self) -> &str {
        self.owner.as_ref().map_or("", |o| o.name.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockOwner {
    pub name: String,
}

/// The ref a lock request is made for (`{"name":"refs/heads/main"}`). Locks here are
/// repository-wide: it is accepted and passed on, not used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockRef {
    pub name: String,
}

/// `POST locks`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateLockRequest {
    pub path: String,
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub refspec: Option<LockRef>,
}

/// The answer to `POST locks` (201; 409 with `message` when the path is locked already, `lock`
/// being the lock that holds it) and to `POST locks/{id}/unlock` (200, the removed lock).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockResponse {
    pub lock: Lock,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The query of `GET locks` (every key optional).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListLocksQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Text, so that a bad number gets the API's own error rather than the query parser's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
    /// Sent by git-lfs; locks are repository-wide, so it is accepted, not used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refspec: Option<String>,
}

impl ListLocksQuery {
    /// The query keys, in the order the struct declares them.
    pub const KEYS: [&'static str; 5] = ["path", "id", "cursor", "limit", "refspec"];
}

/// The answer to `GET locks`: one page, and the cursor of the next when there is one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockList {
    #[serde(default)]
    pub locks: Vec<Lock>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// `POST locks/verify` (git-lfs sends it before a push; an empty body is all defaults).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyLocksRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub refspec: Option<LockRef>,
}

/// The answer to `POST locks/verify`: the page's locks split into the caller's and others'.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyLocksResponse {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    #[serde(default)]
    pub ours: Vec<Lock>,
    #[serde(default)]
    pub theirs: Vec<Lock>,
}

/// `POST locks/{id}/unlock`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnlockRequest {
    #[serde(default)]
    pub force: bool,
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub refspec: Option<LockRef>,
}

/// The answer to `POST <repo>.git/info/xet/locked-paths` (the pre-receive hook's question):
/// the locks on the paths asked about, whoever holds them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockedPaths {
    pub locks: Vec<LockedPath>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockedPath {
    pub owner: String,
    pub path: String,
}
