//! Every route of the server's HTTP API, named once: the server's router registers the CAS
//! templates, its metrics label each request with [`Route::classify`], and clients build
//! their URLs with the path functions here.
//!
//! CAS paths are relative to a CAS URL (and served under `/api` too, [`API_ALIAS`]);
//! repository paths follow `/{repo}.git/` (or `/{repo}/`). Templates use `{name}` captures,
//! the router's syntax.

use crate::hash::MerkleHash;

/// The CAS API is also served under this prefix (`/api/v1/...`), as the reference server does.
pub const API_ALIAS: &str = "/api";

/// The one xorb namespace.
pub const XORB_NAMESPACE: &str = "default";
/// The namespace of global dedup queries.
pub const DEDUP_NAMESPACE: &str = "default-merkledb";

pub const XORB_UPLOAD: &str = "/v1/xorbs/{namespace}/{hash}";
pub const XORB_GRANT: &str = "/v1/xorb-grants/{namespace}/{hash}";
pub const TELEMETRY: &str = "/v1/telemetry";
pub const RECONSTRUCTION: &str = "/v1/reconstructions/{file_hash}";
pub const RECONSTRUCTION_V2: &str = "/v2/reconstructions/{file_hash}";
/// Many files' reconstructions at once: `?file_id={hash}&file_id=...` (the reference
/// client's batch query).
pub const RECONSTRUCTION_BATCH: &str = "/v1/reconstructions";
pub const DEDUP_QUERY: &str = "/v1/chunks/{namespace}/{hash}";
/// The signed fetch URLs of reconstructions point here (with `bytes`, `tid`, `expires`, `sig`).
pub const XORB_DATA: &str = "/v1/xorb-data/{hash}";
pub const SHARD_UPLOAD: &str = "/v1/shards";
pub const SHARD_UPLOAD_V2: &str = "/v2/shards";
/// The objects one upload Batch API answer gave `xet` actions, by the answer's session id (a
/// git-xet server extension: docs/server-api.md, "Read-ahead of a push's objects").
pub const UPLOAD_BATCH: &str = "/v1/upload-batches/{session}";

pub const STATUS: &str = "/";
pub const HEALTH: &str = "/health";
/// Liveness under the name Kubernetes uses: the same answer as [`HEALTH`].
pub const HEALTHZ: &str = "/healthz";
/// Readiness: whether the index and the object store answer.
pub const READYZ: &str = "/readyz";
pub const METRICS: &str = "/metrics";

/// A repository's git-lfs endpoint is `{repo}.git` followed by this.
pub const LFS_ENDPOINT: &str = "/info/lfs";
/// Below the git-lfs endpoint.
pub const LFS_BATCH: &str = "objects/batch";
pub const LFS_OBJECTS: &str = "objects/";
pub const LFS_VERIFY: &str = "verify";
pub const LFS_XET_READ_TOKEN: &str = "xet-read-token";
pub const LFS_XET_WRITE_TOKEN: &str = "xet-write-token";
pub const LFS_LOCKS: &str = "locks";
pub const LFS_LOCKS_VERIFY: &str = "locks/verify";
pub const LFS_UNLOCK: &str = "locks/{id}/unlock";

/// Git smart HTTP, after the repository path.
pub const GIT_INFO_REFS: &str = "/info/refs";
pub const GIT_UPLOAD_PACK: &str = "/git-upload-pack";
pub const GIT_RECEIVE_PACK: &str = "/git-receive-pack";

/// The pre-receive hook's questions, after the repository path.
pub const HOOK_MISSING_OBJECTS: &str = "/info/xet/missing-objects";
pub const HOOK_LOCKED_PATHS: &str = "/info/xet/locked-paths";

/// Each route, for metrics labels and for checking that router and names agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    XorbUpload,
    XorbGrant,
    Telemetry,
    Reconstruction,
    ReconstructionV2,
    ReconstructionBatch,
    DedupQuery,
    XorbData,
    ShardUpload,
    ShardUploadV2,
    UploadBatch,
    Health,
    Ready,
    Metrics,
    Status,
    LfsBatch,
    LfsVerify,
    LfsXetToken,
    LfsLocks,
    LfsUpload,
    LfsDownload,
    GitInfoRefs,
    GitUploadPack,
    GitReceivePack,
    HookCheck,
    LockCheck,
}

impl Route {
    pub const ALL: [Route; 26] = [
        Route::XorbUpload,
        Route::XorbGrant,
        Route::Telemetry,
        Route::Reconstruction,
        Route::ReconstructionV2,
        Route::ReconstructionBatch,
        Route::DedupQuery,
        Route::XorbData,
        Route::ShardUpload,
        Route::ShardUploadV2,
        Route::UploadBatch,
        Route::Health,
        Route::Ready,
        Route::Metrics,
        Route::Status,
        Route::LfsBatch,
        Route::LfsVerify,
        Route::LfsXetToken,
        Route::LfsLocks,
        Route::LfsUpload,
        Route::LfsDownload,
        Route::GitInfoRefs,
        Route::GitUploadPack,
        Route::GitReceivePack,
        Route::HookCheck,
        Route::LockCheck,
    ];

    /// The CAS API's routes (the server registers each [`Route::cas_template`]). The batch
    /// reconstruction's path is the start of the single one's: it comes after it, so that
    /// [`Route::cas`] tells them apart.
    pub const CAS: [Route; 11] = [
        Route::XorbUpload,
        Route::XorbGrant,
        Route::Telemetry,
        Route::Reconstruction,
        Route::ReconstructionV2,
        Route::ReconstructionBatch,
        Route::DedupQuery,
        Route::XorbData,
        Route::ShardUpload,
        Route::ShardUploadV2,
        Route::UploadBatch,
    ];

    /// A fixed name per route (metrics keep a bounded cardinality).
    pub const fn label(self) -> &'static str {
        match self {
            Route::XorbUpload => "xorb_upload",
            Route::XorbGrant => "xorb_grant",
            Route::Telemetry => "telemetry",
            Route::Reconstruction => "reconstruction",
            Route::ReconstructionV2 => "reconstruction_v2",
            Route::ReconstructionBatch => "reconstruction_batch",
            Route::DedupQuery => "dedup_query",
            Route::XorbData => "xorb_data",
            Route::ShardUpload => "shard_upload",
            Route::ShardUploadV2 => "shard_upload_v2",
            Route::UploadBatch => "upload_batch",
            Route::Health => "health",
            Route::Ready => "ready",
            Route::Metrics => "metrics",
            Route::Status => "status",
            Route::LfsBatch => "lfs_batch",
            Route::LfsVerify => "lfs_verify",
            Route::LfsXetToken => "lfs_xet_token",
            Route::LfsLocks => "lfs_locks",
            Route::LfsUpload => "lfs_upload",
            Route::LfsDownload => "lfs_download",
            Route::GitInfoRefs => "git_info_refs",
            Route::GitUploadPack => "git_upload_pack",
            Route::GitReceivePack => "git_receive_pack",
            Route::HookCheck => "hook_check",
            Route::LockCheck => "lock_check",
        }
    }

    /// The router template of a CAS route (relative to the CAS URL); None for the others.
    pub const fn cas_template(self) -> Option<&'static str> {
        Some(match self {
            Route::XorbUpload => XORB_UPLOAD,
            Route::XorbGrant => XORB_GRANT,
            Route::Telemetry => TELEMETRY,
            Route::Reconstruction => RECONSTRUCTION,
            Route::ReconstructionV2 => RECONSTRUCTION_V2,
            Route::ReconstructionBatch => RECONSTRUCTION_BATCH,
            Route::DedupQuery => DEDUP_QUERY,
            Route::XorbData => XORB_DATA,
            Route::ShardUpload => SHARD_UPLOAD,
            Route::ShardUploadV2 => SHARD_UPLOAD_V2,
            Route::UploadBatch => UPLOAD_BATCH,
            _ => return None,
        })
    }

    /// The CAS route of `path` (relative to a CAS URL, with or without [`API_ALIAS`]): the
    /// template's text before its first capture is the path's start.
    pub fn cas(path: &str) -> Option<Route> {
        let path = path.strip_prefix(API_ALIAS).unwrap_or(path);
        Route::CAS.into_iter().find(|route| {
            let template = route.cas_template().unwrap_or_default();
            let fixed = template.split('{').next().unwrap_or(template);
            path.starts_with(fixed)
        })
    }

    /// The route of a request (`method` as HTTP spells it), or None for paths no route serves.
    pub fn classify(method: &str, path: &str) -> Option<Route> {
        if let Some(route) = Route::cas(path) {
            return Some(route);
        }
        match path {
            HEALTH | HEALTHZ => return Some(Route::Health),
            READYZ => return Some(Route::Ready),
            METRICS => return Some(Route::Metrics),
            STATUS => return Some(Route::Status),
            _ => {}
        }
        if let Some(i) = path.rfind(LFS_MARKER) {
            let rest = &path[i + LFS_MARKER.len()..];
            return match rest {
                LFS_BATCH => Some(Route::LfsBatch),
                LFS_VERIFY => Some(Route::LfsVerify),
                LFS_XET_READ_TOKEN | LFS_XET_WRITE_TOKEN => Some(Route::LfsXetToken),
                r if r.starts_with(LFS_LOCKS) => Some(Route::LfsLocks),
                r if r.starts_with(LFS_OBJECTS) && method == "PUT" => Some(Route::LfsUpload),
                r if r.starts_with(LFS_OBJECTS) => Some(Route::LfsDownload),
                _ => None,
            };
        }
        [
            (GIT_INFO_REFS, Route::GitInfoRefs),
            (GIT_UPLOAD_PACK, Route::GitUploadPack),
            (GIT_RECEIVE_PACK, Route::GitReceivePack),
            (HOOK_MISSING_OBJECTS, Route::HookCheck),
            (HOOK_LOCKED_PATHS, Route::LockCheck),
        ]
        .into_iter()
        .find(|(suffix, _)| path.ends_with(suffix))
        .map(|(_, route)| route)
    }
}

/// `/info/lfs/`: what separates a repository from the path below its git-lfs endpoint.
pub const LFS_MARKER: &str = "/info/lfs/";

/// `template` with its captures replaced, in order, by `values`.
fn fill(template: &str, values: &[&str]) -> String {
    let mut out = String::with_capacity(template.len() + 64);
    let mut values = values.iter();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').map_or(rest.len(), |c| open + c + 1);
        out.push_str(values.next().copied().unwrap_or_default());
        rest = &rest[close..];
    }
    out.push_str(rest);
    out
}

/// `/v1/xorbs/default/{hash}`.
pub fn xorb_path(hash: &MerkleHash) -> String {
    fill(XORB_UPLOAD, &[XORB_NAMESPACE, &hash.to_hex()])
}

/// `/v1/xorb-grants/default/{hash}`.
pub fn xorb_grant_path(hash: &MerkleHash) -> String {
    fill(XORB_GRANT, &[XORB_NAMESPACE, &hash.to_hex()])
}

/// `/v1/reconstructions/{file_hash}`.
pub fn reconstruction_path(file: &MerkleHash) -> String {
    fill(RECONSTRUCTION, &[&file.to_hex()])
}

/// `/v2/reconstructions/{file_hash}`.
pub fn reconstruction_v2_path(file: &MerkleHash) -> String {
    fill(RECONSTRUCTION_V2, &[&file.to_hex()])
}

/// `/v1/reconstructions?file_id=..&file_id=..` for `files`.
pub fn reconstruction_batch_path(files: &[MerkleHash]) -> String {
    let mut path = format!("{RECONSTRUCTION_BATCH}?");
    for (i, file) in files.iter().enumerate() {
        if i > 0 {
            path.push('&');
        }
        path.push_str("file_id=");
        path.push_str(&file.to_hex());
    }
    path
}

/// `/v1/chunks/default-merkledb/{chunk}`.
/// The path of [`UPLOAD_BATCH`] for one Batch API answer's session id.
pub fn upload_batch_path(session: &str) -> String {
    fill(UPLOAD_BATCH, &[session])
}

pub fn dedup_query_path(chunk: &MerkleHash) -> String {
    fill(DEDUP_QUERY, &[DEDUP_NAMESPACE, &chunk.to_hex()])
}

/// `/v1/xorb-data/{hash}` (the signed query is the server's to add).
pub fn xorb_data_path(xorb: &MerkleHash) -> String {
    fill(XORB_DATA, &[&xorb.to_hex()])
}

/// `locks/{id}/unlock`, below the git-lfs endpoint.
pub fn unlock_path(id: &str) -> String {
    fill(LFS_UNLOCK, &[id])
}

/// The lock id of a `locks/{id}/unlock` path below the git-lfs endpoint.
pub fn unlock_id(rest: &str) -> Option<&str> {
    let (before, after) = LFS_UNLOCK.split_once("{id}")?;
    rest.strip_prefix(before)?.strip_suffix(after)
}
