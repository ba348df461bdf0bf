//! Taking a backup. The order of the steps is what makes it consistent while servers run
//! (the argument is in docs/server-operations.md, "Backup and restore"):
//! 1. copy every stored object the destination lacks;
//! 2. bundle every git repository (each bundle reads its refs once);
//! 3. dump the index in one read transaction;
//! 4. copy the objects that dump needs and step 1 did not copy (stored since it began);
//! 5. write the secret, then the manifest (a snapshot without one is incomplete).

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::objects::{self, DestObjects};
use super::{
    git, index_file, io_err, load_manifest, sha256_hex, snapshot_key, snapshot_names, BackupError,
    Dest, FileEntry, Manifest, RepoEntry, FORMAT,
};
use git_xet_core::MerkleHash;
use git_xet_index::dump::{Value, TABLES};
use git_xet_index::Index;
use git_xet_io::time::{now_secs, rfc3339};
use git_xet_storage::{ObjectKey, ObjectStore};

pub struct BackupOptions {
    /// Where the hosted git repositories are.
    pub repos_root: PathBuf,
    /// For bundles on their way to the destination.
    pub tmp_dir: PathBuf,
    /// The signing secret to include (`None`: `--exclude-secret`).
    pub secret: Option<[u8; 32]>,
    /// `sqlite` or `postgres`, for the manifest.
    pub index_engine: String,
}

#[derive(Debug, Clone)]
pub struct BackupReport {
    pub snapshot: String,
    /// Objects the snapshot needs, and their bytes.
    pub objects: usize,
    pub object_bytes: u64,
    /// Objects this run copied, and their bytes.
    pub copied: u64,
    pub copied_bytes: u64,
    pub repositories: usize,
    pub elapsed: Duration,
}

/// The snapshot's name: its start time, sortable (`20261127T084500Z`).
fn snapshot_name(secs: u64) -> String {
    rfc3339(secs).replace(['-', ':'], "")
}

async fn put_file(
    dest: &Dest,
    snapshot: &str,
    path: &str,
    data: Bytes,
    files: &mut Vec<FileEntry>,
) -> Result<(), BackupError> {
    files.push(FileEntry {
        path: path.to_string(),
        size: data.len() as u64,
        sha256: sha256_hex(&data),
    });
    let key = snapshot_key(snapshot, path);
    dest.put(&key, data)
        .await
        .map_err(io_err(format!("writing {key} to {dest}")))
}

fn hash_at(row: &[Value], i: usize) -> Option<MerkleHash> {
    match row.get(i) {
        Some(Value::Blob(b)) => MerkleHash::from_slice(b),
        _ => None,
    }
}

/// The objects an index dump needs: its xorbs (those gc has not condemned) and shards.
fn needed_objects(dump: &git_xet_index::dump::Dump) -> Vec<ObjectKey> {
    let table = |name: &str| {
        let i = TABLES
            .iter()
            .position(|t| t.name == name)
            .expect("known table");
        &dump[i]
    };
    let condemned: HashSet<MerkleHash> = table("condemned_xorbs")
        .iter()
        .filter_map(|r| hash_at(r, 0))
        .collect();
    let mut keys: Vec<ObjectKey> = table("xorbs")
        .iter()
        .filter_map(|r| hash_at(r, 1))
        .filter(|h| !condemned.contains(h))
        .map(ObjectKey::xorb)
        .collect();
    keys.extend(
        table("shards")
            .iter()
            .filter_map(|r| hash_at(r, 0))
            .map(ObjectKey::shard),
    );
    keys
}

pub async fn backup(
    store: &dyn ObjectStore,
    index: &Arc<dyn Index>,
    dest: &Dest,
    opts: &BackupOptions,
) -> Result<BackupReport, BackupError> {
    let began = Instant::now();
    let started = now_secs();
    let name = snapshot_name(started);
    if dest
        .len(&snapshot_key(&name, "manifest.json"))
        .await
        .map_err(io_err("reading the destination"))?
        .is_some()
    {
        return Err(BackupError::Damaged(format!(
            "snapshot {name} exists already: wait a second and run the backup again"
        )));
    }
    let mut manifests = Vec::new();
    for earlier in snapshot_names(dest).await? {
        // A damaged earlier manifest only costs its objects' hashes (they are read again).
        if let Ok(m) = load_manifest(dest, Some(&earlier)).await {
            manifests.push(m);
        }
    }
    let mut have = DestObjects::load(dest, &manifests).await?;

    // 1. Everything stored now.
    eprintln!("backup: copying new objects to {dest}");
    let stored = objects::list_store(store).await?;
    let (_, mut copied, mut copied_bytes) =
        objects::copy(store, dest, &mut have, &stored, false, "backup: objects").await?;

    // 2. Git, refs first: every LFS object these refs point at is registered already.
    let mut files = Vec::new();
    let mut repositories = Vec::new();
    let repos = git::list_repos(&opts.repos_root).map_err(io_err(format!(
        "listing repositories in {}",
        opts.repos_root.display()
    )))?;
    eprintln!("backup: bundling {} git repositories", repos.len());
    std::fs::create_dir_all(&opts.tmp_dir).map_err(io_err("creating the temporary directory"))?;
    let mut progress = super::Progress::new("backup: git");
    for (n, (repo, dir)) in repos.iter().enumerate() {
        progress.tick(|| format!("{n}/{} repositories", repos.len()));
        let tmp = tempfile::Builder::new()
            .suffix(".bundle")
            .tempfile_in(&opts.tmp_dir)
            .map_err(io_err("creating a temporary bundle"))?;
        let (head, made) = git::bundle(dir, tmp.path()).await?;
        let bundle = if made {
            let path = format!("git/{repo}.bundle");
            let data = tokio::fs::read(tmp.path())
                .await
                .map_err(io_err(format!("reading the bundle of {repo}")))?;
            put_file(dest, &name, &path, Bytes::from(data), &mut files).await?;
            Some(path)
        } else {
            None
        };
        repositories.push(RepoEntry {
            name: repo.to_string(),
            bundle,
            head,
        });
    }

    // 3. The index, as one snapshot.
    eprintln!("backup: dumping the index");
    let reader = index.clone();
    let dump = tokio::task::spawn_blocking(move || reader.dump())
        .await
        .map_err(|e| BackupError::Task(e.to_string()))??;
    let mut index_rows = BTreeMap::new();
    let mut index_columns = BTreeMap::new();
    for (table, rows) in TABLES.iter().zip(&dump) {
        index_rows.insert(table.name.to_string(), rows.len() as u64);
        index_columns.insert(
            table.name.to_string(),
            table.columns.iter().map(|c| c.0.to_string()).collect(),
        );
        let data = Bytes::from(index_file::encode(rows));
        put_file(dest, &name, &index_file::path(table), data, &mut files).await?;
    }

    // 4. What the dump needs: step 1 copied all of it but what was stored since.
    let needed = needed_objects(&dump);
    drop(dump);
    let (entries, late, late_bytes) = objects::copy(
        store,
        dest,
        &mut have,
        &needed,
        true,
        "backup: objects the index needs",
    )
    .await?;
    copied += late;
    copied_bytes += late_bytes;

    // 5. The secret, then the manifest.
    if let Some(secret) = &opts.secret {
        put_file(
            dest,
            &name,
            "secret",
            Bytes::copy_from_slice(secret),
            &mut files,
        )
        .await?;
    }
    let object_bytes = entries.iter().map(|e| e.size).sum();
    let report = BackupReport {
        snapshot: name.clone(),
        objects: entries.len(),
        object_bytes,
        copied,
        copied_bytes,
        repositories: repositories.len(),
        elapsed: began.elapsed(),
    };
    let manifest = Manifest {
        format: FORMAT,
        name: name.clone(),
        started: rfc3339(started),
        finished: rfc3339(now_secs()),
        server_version: env!("CARGO_PKG_VERSION").to_string(),
        index_engine: opts.index_engine.clone(),
        secret_included: opts.secret.is_some(),
        index_rows,
        index_columns,
        files,
        repositories,
        objects: entries,
    };
    let json = serde_json::to_vec_pretty(&manifest).expect("a manifest serializes");
    let key = snapshot_key(&name, "manifest.json");
    dest.put(&key, Bytes::from(json))
        .await
        .map_err(io_err(format!("writing {key} to {dest}")))?;
    Ok(report)
}
