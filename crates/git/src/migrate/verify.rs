//! `migrate --verify` (the default): every object downloaded back through XET from the
//! destination alone (fresh metadata, no local objects, no chunk cache), its sha256 checked.

use crate::credentials::strip_userinfo;
use crate::lfs_objects::LfsObject;
use crate::repo::Repo;
use crate::GitError;
use git_xet_lfs::batch::{BatchClient, BATCH_SIZE};
use git_xet_lfs::objects::{ObjectDownload, ObjectService};
use git_xet_lfs::pointer::Oid;
use git_xet_lfs::protocol::Operation;
use git_xet_lfs::store::LfsStore;

/// Downloads every object through XET from the server alone and checks its sha256.
pub fn verify_all(
    repo: &Repo,
    batch: &BatchClient,
    rt: &tokio::runtime::Handle,
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
    let mut env = crate::objects::env_for(
        repo,
        repo.lfs_store(),
        batch.http(),
        batch.authenticator().clone(),
    );
    // Fresh metadata, no local objects, no chunk cache: every byte comes from the server.
    env.store = LfsStore::in_dir(&scratch.path().join("lfs"));
    env.xet_dir = scratch.path().join("meta");
    env.chunk_cache = false;
    env.chunk_store = None;
    let mut service = ObjectService::new(env);
    let endpoint = strip_userinfo(batch.endpoint());
    let mut verified = 0u64;
    for group in objects.chunks(BATCH_SIZE) {
        let specs: Vec<(Oid, u64)> = group.iter().map(|o| (o.oid, o.size)).collect();
        let answer = rt.block_on(batch.batch(Operation::Download, &["xet"], &specs))?;
        super::require_xet(&answer.transfer, batch.endpoint())?;
        for obj in group {
            let path = ObjectDownload::from_batch(&answer, &endpoint, obj.oid, obj.size)
                .and_then(|want| service.download(&want, None))
                .map_err(|source| GitError::Verification {
                    path: obj.path.clone(),
                    oid: obj.oid,
                    source: Box::new(source),
                })?;
            let _ = std::fs::remove_file(path);
            verified += 1;
        }
    }
    service.shutdown();
    say(format!(
        "verified: all {verified} objects download through XET with the right sha256"
    ));
    Ok(verified)
}
