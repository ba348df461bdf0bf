//! `migrate --verify` (the default): every object downloaded back through XET from the
//! destination alone (fresh metadata, no local objects, no chunk cache), its sha256 checked.

use std::path::PathBuf;

use crate::git::credentials::strip_userinfo;
use crate::git::filter::store::LfsStore;
use crate::git::lfs_objects::LfsObject;
use crate::git::repo::Repo;
use crate::git::GitError;
use crate::lfs::agent::TransferBackend;
use crate::lfs::batch::{BatchClient, BatchObject, BATCH_SIZE};
use crate::lfs::pointer::Oid;
use crate::lfs::progress::{AnswerSink, Progress};
use crate::lfs::protocol::{Operation, TransferRequest};
use crate::lfs::LfsError;

/// Downloads every object through XET from the server alone and checks its sha256.
pub fn verify_all(
    repo: &Repo,
    batch: &BatchClient,
    rt: &tokio::runtime::Runtime,
    objects: &[LfsObject],
    say: &dyn Fn(String),
) -> Result<u64, GitError> {
    let scratch = tempfile::Builder::new()
        .prefix("verify-")
        .tempdir_in(repo.xet_dir().join("tmp"))
        .or_else(|_| {
            std::fs::create_dir_all(repo.xet_dir().join("tmp"))?;
            tempfile::Builder::new()
                .prefix("verify-")
                .tempdir_in(repo.xet_dir().join("tmp"))
        })
        .map_err(|e| GitError::io("creating a scratch directory under .git/xet", e))?;
    let mut env = crate::git::transfer::agent_env_for(
        repo,
        LfsStore::of(repo),
        batch.http(),
        batch.authenticator().clone(),
    );
    // Fresh metadata, no local objects, no chunk cache: every byte comes from the server.
    env.lfs_tmp_dir = scratch.path().join("out");
    env.lfs_objects_dir = PathBuf::from("/nonexistent");
    env.xet_dir = scratch.path().join("meta");
    env.chunk_cache = false;
    let mut backend = super::new_backend(env, Operation::Download)?;
    let mut verified = 0u64;
    for group in objects.chunks(BATCH_SIZE) {
        let specs: Vec<(Oid, u64)> = group.iter().map(|o| (o.oid, o.size)).collect();
        let answer = rt.block_on(batch.batch(Operation::Download, &["xet"], &specs))?;
        super::require_xet(&answer.transfer, batch.endpoint())?;
        for obj in group {
            let entry = answer.objects.iter().find(|b| b.oid == obj.oid);
            let failed = |source| GitError::Verification {
                path: obj.path.clone(),
                oid: obj.oid,
                source: Box::new(source),
            };
            let endpoint = || strip_userinfo(batch.endpoint());
            let action = match entry {
                Some(BatchObject {
                    error: Some(err), ..
                }) => {
                    return Err(failed(LfsError::object_refused(
                        endpoint(),
                        obj.oid,
                        err.code,
                        err.message.clone(),
                    )))
                }
                Some(BatchObject {
                    action: Some(action),
                    ..
                }) => action.clone(),
                _ => {
                    return Err(failed(LfsError::NoDownload {
                        endpoint: endpoint(),
                        oid: obj.oid,
                    }))
                }
            };
            let req = TransferRequest {
                operation: Operation::Download,
                oid: obj.oid,
                size: obj.size,
                path: None,
                action: Some(action),
            };
            let progress = Progress::new(
                AnswerSink::new(std::io::sink()),
                &obj.oid.to_hex(),
                obj.size,
            );
            let path = backend.download(&req, &progress).map_err(failed)?;
            let _ = std::fs::remove_file(path);
            verified += 1;
        }
    }
    backend.terminate();
    say(format!(
        "verified: all {verified} objects download through XET with the right sha256"
    ));
    Ok(verified)
}
