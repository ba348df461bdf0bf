//! Each wire type against literal JSON as the deployed clients and servers send it: what we
//! write must be these bytes, what they write must parse.

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::cas::*;
use super::locks::*;
use super::routes::*;
use crate::MerkleHash;

/// `value` serializes to exactly `json`, and `json` parses back to `value`.
fn exact<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(value: &T, json: &str) {
    assert_eq!(serde_json::to_string(value).unwrap(), json);
    assert_eq!(&serde_json::from_str::<T>(json).unwrap(), value);
}

fn parses<T: DeserializeOwned>(json: &str) -> T {
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}: {e}"))
}

#[test]
fn upload_answers_are_hf_xets() {
    exact(
        &UploadXorbResponse { was_inserted: true },
        r#"{"was_inserted":true}"#,
    );
    exact(
        &UploadXorbResponse {
            was_inserted: false,
        },
        r#"{"was_inserted":false}"#,
    );
    exact(
        &UploadShardResponse {
            result: ShardResult::SyncPerformed,
        },
        r#"{"result":1}"#,
    );
    exact(
        &UploadShardResponse {
            result: ShardResult::Exists,
        },
        r#"{"result":0}"#,
    );
    assert!(ShardResult::from_changed(true).changed());
    assert!(!ShardResult::from_changed(false).changed());
    // Strict: what is not one of these answers is an error, never a guess.
    for bad in [
        "",
        "{}",
        "<html>502</html>",
        r#"{"was_inserted":"yes"}"#,
        r#"{"result":2}"#,
    ] {
        assert!(
            serde_json::from_str::<UploadXorbResponse>(bad).is_err(),
            "{bad}"
        );
        assert!(
            serde_json::from_str::<UploadShardResponse>(bad).is_err(),
            "{bad}"
        );
    }
    // Fields a newer server adds are ignored.
    let x: UploadXorbResponse = parses(r#"{"was_inserted":true,"extra":1}"#);
    assert!(x.was_inserted);
}

#[test]
fn shard_v2_frames_are_hf_xets() {
    exact(
        &ShardUploadFrame::Validating {
            verified: 0,
            total: 3,
        },
        r#"{"type":"validating","verified":0,"total":3}"#,
    );
    exact(
        &ShardUploadFrame::Committing {
            stage: CommitStage::Uploading,
        },
        r#"{"type":"committing","stage":"uploading"}"#,
    );
    exact(
        &ShardUploadFrame::Committing {
            stage: CommitStage::Syncing,
        },
        r#"{"type":"committing","stage":"syncing"}"#,
    );
    exact(&ShardUploadFrame::Result, r#"{"type":"result"}"#);
}

#[test]
fn xet_token_answer_is_camel_case_and_hides_its_token() {
    let t = XetTokenResponse {
        access_token: "secret".into(),
        cas_url: "http://h:1".into(),
        exp: 1_700_000_000,
    };
    exact(
        &t,
        r#"{"accessToken":"secret","casUrl":"http://h:1","exp":1700000000}"#,
    );
    assert!(!format!("{t:?}").contains("secret"));
}

fn lock() -> Lock {
    Lock {
        id: "00ab".into(),
        locked_at: "2026-01-02T03:04:05Z".into(),
        owner: Some(LockOwner {
            name: "alice".into(),
        }),
        path: "art/a b.psd".into(),
    }
}

const LOCK: &str = r#"{"id":"00ab","locked_at":"2026-01-02T03:04:05Z","owner":{"name":"alice"},"path":"art/a b.psd"}"#;

#[test]
fn lock_answers_are_git_lfs_locking_api() {
    exact(&lock(), LOCK);
    exact(
        &LockResponse {
            lock: lock(),
            message: None,
        },
        &format!(r#"{{"lock":{LOCK}}}"#),
    );
    exact(
        &LockResponse {
            lock: lock(),
            message: Some("art/a b.psd is already locked by alice".into()),
        },
        &format!(r#"{{"lock":{LOCK},"message":"art/a b.psd is already locked by alice"}}"#),
    );
    exact(
        &LockList {
            locks: vec![lock()],
            next_cursor: None,
        },
        &format!(r#"{{"locks":[{LOCK}]}}"#),
    );
    exact(
        &LockList {
            locks: vec![],
            next_cursor: Some("00ac".into()),
        },
        r#"{"locks":[],"next_cursor":"00ac"}"#,
    );
    exact(
        &VerifyLocksResponse {
            next_cursor: Some("00ac".into()),
            ours: vec![lock()],
            theirs: vec![],
        },
        &format!(r#"{{"next_cursor":"00ac","ours":[{LOCK}],"theirs":[]}}"#),
    );
    // git-lfs's documented examples (owner optional, 409 with extra fields) parse.
    let l: Lock = parses(
        r#"{"id":"some-uuid","path":"foo/bar.zip","locked_at":"2016-05-17T15:49:06+00:00"}"#,
    );
    assert_eq!((l.owner_name(), l.path.as_str()), ("", "foo/bar.zip"));
    let r: LockResponse = parses(&format!(
        r#"{{"lock":{LOCK},"message":"already created lock","documentation_url":"https://x","request_id":"1"}}"#
    ));
    assert_eq!(r.lock.owner_name(), "alice");
    let v: VerifyLocksResponse = parses("{}");
    assert!(v.ours.is_empty() && v.theirs.is_empty() && v.next_cursor.is_none());
}

#[test]
fn lock_requests_are_what_git_lfs_sends() {
    let main = Some(LockRef {
        name: "refs/heads/main".into(),
    });
    exact(
        &CreateLockRequest {
            path: "foo/bar.zip".into(),
            refspec: main.clone(),
        },
        r#"{"path":"foo/bar.zip","ref":{"name":"refs/heads/main"}}"#,
    );
    exact(
        &CreateLockRequest {
            path: "a".into(),
            refspec: None,
        },
        r#"{"path":"a"}"#,
    );
    exact(
        &VerifyLocksRequest {
            cursor: Some("00ab".into()),
            limit: Some(100),
            refspec: main.clone(),
        },
        r#"{"cursor":"00ab","limit":100,"ref":{"name":"refs/heads/main"}}"#,
    );
    exact(&VerifyLocksRequest::default(), "{}");
    exact(
        &UnlockRequest {
            force: true,
            refspec: main,
        },
        r#"{"force":true,"ref":{"name":"refs/heads/main"}}"#,
    );
    exact(&UnlockRequest::default(), r#"{"force":false}"#);
    let u: UnlockRequest = parses("{}");
    assert!(!u.force);
    // A create request without a path is refused, not defaulted.
    assert!(serde_json::from_str::<CreateLockRequest>("{}").is_err());
    assert_eq!(
        ListLocksQuery::KEYS,
        ["path", "id", "cursor", "limit", "refspec"]
    );
    exact(
        &ListLocksQuery {
            path: Some("a".into()),
            limit: Some("5".into()),
            ..ListLocksQuery::default()
        },
        r#"{"path":"a","limit":"5"}"#,
    );
}

#[test]
fn locked_paths_answer_is_the_hooks() {
    exact(
        &LockedPaths {
            locks: vec![LockedPath {
                owner: "bob".into(),
                path: "a.bin".into(),
            }],
        },
        r#"{"locks":[{"owner":"bob","path":"a.bin"}]}"#,
    );
}

fn hash(byte: u8) -> MerkleHash {
    MerkleHash::from_hex(&format!("{byte:02x}").repeat(32)).unwrap()
}

#[test]
fn path_functions_fill_the_templates() {
    let h = hash(0xab);
    let hex = h.to_hex();
    assert_eq!(xorb_path(&h), format!("/v1/xorbs/default/{hex}"));
    assert_eq!(
        xorb_grant_path(&h),
        format!("/v1/xorb-grants/default/{hex}")
    );
    assert_eq!(
        reconstruction_path(&h),
        format!("/v1/reconstructions/{hex}")
    );
    assert_eq!(
        reconstruction_v2_path(&h),
        format!("/v2/reconstructions/{hex}")
    );
    assert_eq!(
        dedup_query_path(&h),
        format!("/v1/chunks/default-merkledb/{hex}")
    );
    assert_eq!(xorb_data_path(&h), format!("/v1/xorb-data/{hex}"));
    assert_eq!(
        reconstruction_batch_path(&[h, h]),
        format!("/v1/reconstructions?file_id={hex}&file_id={hex}")
    );
    assert_eq!(unlock_path("00ab"), "locks/00ab/unlock");
    assert_eq!(unlock_id("locks/00ab/unlock"), Some("00ab"));
    assert_eq!(unlock_id("locks/verify"), None);
}

/// A request path for each route, built from the constants and path functions.
fn sample(route: Route) -> (&'static str, String) {
    let h = hash(7);
    let lfs = |rest: &str| format!("/org/r.git{LFS_ENDPOINT}/{rest}");
    let repo = |suffix: &str| format!("/org/r.git{suffix}");
    match route {
        Route::XorbUpload => ("POST", xorb_path(&h)),
        Route::XorbGrant => ("POST", xorb_grant_path(&h)),
        Route::Telemetry => ("POST", TELEMETRY.into()),
        Route::Reconstruction => ("GET", reconstruction_path(&h)),
        Route::ReconstructionV2 => ("GET", reconstruction_v2_path(&h)),
        // What the server classifies: the path, without the query.
        Route::ReconstructionBatch => ("GET", RECONSTRUCTION_BATCH.into()),
        Route::DedupQuery => ("GET", dedup_query_path(&h)),
        Route::XorbData => ("GET", xorb_data_path(&h)),
        Route::ShardUpload => ("POST", SHARD_UPLOAD.into()),
        Route::ShardUploadV2 => ("POST", SHARD_UPLOAD_V2.into()),
        Route::UploadBatch => ("GET", upload_batch_path(&"ab".repeat(16))),
        Route::Health => ("GET", HEALTH.into()),
        Route::Ready => ("GET", READYZ.into()),
        Route::Metrics => ("GET", METRICS.into()),
        Route::Status => ("GET", STATUS.into()),
        Route::LfsBatch => ("POST", lfs(LFS_BATCH)),
        Route::LfsVerify => ("POST", lfs(LFS_VERIFY)),
        Route::LfsXetToken => ("GET", lfs(LFS_XET_WRITE_TOKEN)),
        Route::LfsLocks => ("POST", lfs(&unlock_path("00ab"))),
        Route::LfsUpload => ("PUT", lfs(&format!("{LFS_OBJECTS}{}", "a".repeat(64)))),
        Route::LfsDownload => ("GET", lfs(&format!("{LFS_OBJECTS}{}", "a".repeat(64)))),
        Route::GitInfoRefs => ("GET", repo(GIT_INFO_REFS)),
        Route::GitUploadPack => ("POST", repo(GIT_UPLOAD_PACK)),
        Route::GitReceivePack => ("POST", repo(GIT_RECEIVE_PACK)),
        Route::HookCheck => ("POST", repo(HOOK_MISSING_OBJECTS)),
        Route::LockCheck => ("POST", repo(HOOK_LOCKED_PATHS)),
    }
}

#[test]
fn every_route_is_classified_as_itself() {
    let mut labels = std::collections::BTreeSet::new();
    for route in Route::ALL {
        let (method, path) = sample(route);
        assert_eq!(Route::classify(method, &path), Some(route), "{path}");
        assert!(
            labels.insert(route.label()),
            "label {} twice",
            route.label()
        );
        assert_eq!(
            route.cas_template().is_some(),
            Route::CAS.contains(&route),
            "{route:?}"
        );
        if route.cas_template().is_some() {
            let aliased = format!("{API_ALIAS}{path}");
            assert_eq!(Route::classify(method, &aliased), Some(route), "{aliased}");
        }
    }
    for path in ["/nothing", "/org/r.git/info/lfs/unknown", "/v3/shards"] {
        assert_eq!(Route::classify("GET", path), None, "{path}");
    }
    assert_eq!(
        Route::classify("GET", &format!("/org/r.git{LFS_ENDPOINT}/{LFS_LOCKS}")),
        Some(Route::LfsLocks)
    );
}
