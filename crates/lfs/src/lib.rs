//! git-lfs integration: the custom transfer protocol (line-delimited JSON on stdin/stdout)
//! and LFS pointer files. Drives the client layer.
//!
//! | module       | job                                                                  |
//! |--------------|----------------------------------------------------------------------|
//! | [`protocol`] | message types, strict parsing of requests, serialization of answers |
//! | [`agent`]    | the state machine: `init` -> `upload`/`download`* -> `terminate`     |
//! | [`progress`] | `progress` events, monotonic, ending at the object's size           |
//! | [`action`]   | the `xet` batch action: CAS URL, token, expiry, session, file hash   |
//! | [`coordinator`] | small uploads of one push shared by its agents: one session, one shard |
//! | [`batch`]    | a git-lfs Batch API client (for the filter, migrate and status)     |
//! | [`pointer`](mod@pointer) | pointer files: strict parsing and canonical writing                  |
//! | [`objects`]  | the object service: upload/download LFS objects through XET, typed  |
//! | [`store`]    | git-lfs's object store (`.git/lfs/objects`, `.git/lfs/tmp`): its layout |
//! | [`xet_backend`] | the agent's backend: git-lfs messages adapted to [`objects`]      |

pub mod action;
pub mod agent;
pub mod batch;
pub mod coordinator;
mod error;
pub mod objects;
/// Pointer files live in the protocol core (the server reads them too); re-exported here.
pub use git_xet_core::lfs::pointer;
pub mod progress;
pub mod protocol;
pub mod store;
mod tokens;
pub mod xet_backend;

pub use error::{LfsError, StatusError};
