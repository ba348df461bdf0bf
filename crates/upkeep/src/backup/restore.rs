//! Restoring a snapshot into an empty deployment: everything is read and checked against
//! the manifest before anything is written; then objects, git repositories, the secret,
//! and last the index (in one transaction: a deployment whose index has rows is complete).

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};

use super::objects::parse_dest_key;
use super::{
    git, index_file, io_err, load_manifest, sha256_hex, snapshot_key, BackupError, Dest, Manifest,
    Progress,
};
use git_xet_deployment::IndexLocation;
use git_xet_index::dump::{Dump, TABLES};
use git_xet_index::RepoName;
use git_xet_index::{Index, PgIndex};
use git_xet_storage::{ObjectKind, ObjectStore};

pub struct RestoreOptions {
    /// The snapshot to restore (default: the latest complete one).
    pub snapshot: Option<String>,
    pub repos_root: PathBuf,
    pub tmp_dir: PathBuf,
    /// The deployment's index and data directory: where the secret goes.
    pub index_location: IndexLocation,
    pub data_dir: PathBuf,
    /// The secret when the snapshot was taken with `--exclude-secret`.
    pub secret: Option<[u8; 32]>,
    /// The pre-receive hook the restored repositories get.
    pub hook: String,
}

/// A snapshot file's bytes, checked against the manifest.
async fn read_checked(dest: &Dest, manifest: &Manifest, path: &str) -> Result<Bytes, BackupError> {
    let entry = manifest
        .files
        .iter()
        .find(|f| f.path == path)
        .ok_or_else(|| BackupError::Damaged(format!("the manifest does not list {path}")))?;
    let key = snapshot_key(&manifest.name, path);
    let data = dest
        .get(&key)
        .await
        .map_err(io_err(format!("reading {key}")))?;
    if data.len() as u64 != entry.size || sha256_hex(&data) != entry.sha256 {
        return Err(BackupError::Damaged(format!(
            "{key} is damaged (its size or sha256 differs from the manifest's): run \
             `git xet server backup verify`, or restore an earlier snapshot"
        )));
    }
    Ok(data)
}

/// Refuses a deployment that holds anything (a secret alone does not count).
async fn check_empty(
    store: &dyn ObjectStore,
    index: &Arc<dyn Index>,
    opts: &RestoreOptions,
) -> Result<(), BackupError> {
    let reader = index.clone();
    let rows = tokio::task::spawn_blocking(move || reader.holds_rows())
        .await
        .map_err(|e| BackupError::Task(e.to_string()))??;
    if rows {
        return Err(BackupError::NotEmpty {
            what: "its index has records".into(),
        });
    }
    for kind in [ObjectKind::Xorb, ObjectKind::Shard] {
        let first = store
            .list(kind)
            .try_next()
            .await
            .map_err(io_err("listing the object store"))?;
        if first.is_some() {
            return Err(BackupError::NotEmpty {
                what: format!("its object store holds {kind:?} objects"),
            });
        }
    }
    let repos = git::list_repos(&opts.repos_root)
        .map_err(io_err(format!("listing {}", opts.repos_root.display())))?;
    if let Some((name, _)) = repos.first() {
        return Err(BackupError::NotEmpty {
            what: format!("repository {name} exists in {}", opts.repos_root.display()),
        });
    }
    Ok(())
}

fn check_columns(manifest: &Manifest) -> Result<(), BackupError> {
    for table in TABLES {
        let ours: Vec<&str> = table.columns.iter().map(|c| c.0).collect();
        let theirs = manifest.index_columns.get(table.name);
        if theirs.map(|t| t.iter().map(String::as_str).collect::<Vec<_>>()) != Some(ours) {
            return Err(BackupError::BadManifest(
                manifest.name.clone(),
                format!(
                    "its table {} has other columns than this server's (backed up by \
                     version {}): restore with that version",
                    table.name, manifest.server_version
                ),
            ));
        }
    }
    Ok(())
}

fn write_secret_file(data_dir: &std::path::Path, secret: &[u8; 32]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let path = git_xet_identity::keys::secret_path(data_dir);
    let dir = path.parent().expect("keys directory");
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o600))?;
    tmp.write_all(secret)?;
    tmp.as_file().sync_all()?;
    tmp.persist(&path).map_err(|e| e.error)?;
    std::fs::File::open(dir)?.sync_all()
}

pub struct RestoreReport {
    pub snapshot: String,
    pub objects: usize,
    pub repositories: usize,
}

pub async fn restore(
    store: &dyn ObjectStore,
    index: &Arc<dyn Index>,
    dest: &Dest,
    opts: &RestoreOptions,
) -> Result<RestoreReport, BackupError> {
    let manifest = load_manifest(dest, opts.snapshot.as_deref()).await?;
    check_columns(&manifest)?;
    check_empty(store, index, opts).await?;
    let secret: [u8; 32] = if manifest.secret_included {
        let data = read_checked(dest, &manifest, "secret").await?;
        data.as_ref()
            .try_into()
            .map_err(|_| BackupError::Damaged("the snapshot's secret is not 32 bytes".into()))?
    } else {
        opts.secret
            .ok_or_else(|| BackupError::NoSecret(manifest.name.clone()))?
    };
    eprintln!("restore: reading snapshot {} from {dest}", manifest.name);
    let mut dump: Dump = Vec::new();
    for table in TABLES {
        let data = read_checked(dest, &manifest, &index_file::path(table)).await?;
        dump.push(index_file::decode(table, &data)?);
    }

    // Objects: checked against the manifest's size and sha256 on the way.
    let total = manifest.objects.len();
    let mut progress = Progress::new("restore: objects");
    let mut copies = futures::stream::iter(manifest.objects.iter().map(|entry| async move {
        let key = parse_dest_key(&entry.key)
            .ok_or_else(|| BackupError::Damaged(format!("the manifest lists {:?}", entry.key)))?;
        let data = dest
            .get(&entry.key)
            .await
            .map_err(io_err(format!("reading {}", entry.key)))?;
        if data.len() as u64 != entry.size || sha256_hex(&data) != entry.sha256 {
            return Err(BackupError::Damaged(format!(
                "{} is damaged (size or sha256 differs from the manifest's)",
                entry.key
            )));
        }
        store
            .put(key, data)
            .await
            .map_err(io_err(format!("storing {}", entry.key)))?;
        Ok(entry.size)
    }))
    .buffer_unordered(4);
    let (mut done, mut bytes) = (0usize, 0u64);
    while let Some(size) = copies.next().await {
        done += 1;
        bytes += size?;
        progress.tick(|| format!("{done}/{total} ({})", git_xet_io::human::human_bytes(bytes)));
    }
    drop(copies);

    eprintln!("restore: {} git repositories", manifest.repositories.len());
    std::fs::create_dir_all(&opts.tmp_dir).map_err(io_err("creating the temporary directory"))?;
    for repo in &manifest.repositories {
        let name = RepoName::parse(&repo.name)
            .map_err(|e| BackupError::Damaged(format!("the manifest lists repository {e}")))?;
        let tmp = match &repo.bundle {
            Some(path) => {
                let data = read_checked(dest, &manifest, path).await?;
                let tmp = tempfile::Builder::new()
                    .suffix(".bundle")
                    .tempfile_in(&opts.tmp_dir)
                    .map_err(io_err("creating a temporary bundle"))?;
                std::fs::write(tmp.path(), &data).map_err(io_err("writing a temporary bundle"))?;
                Some(tmp)
            }
            None => None,
        };
        let bundle = tmp.as_ref().map(|t| t.path());
        git::unbundle(
            &opts.repos_root,
            &name,
            bundle,
            repo.head.as_deref(),
            &opts.hook,
        )
        .await?;
    }

    match &opts.index_location {
        IndexLocation::Sqlite(_) => write_secret_file(&opts.data_dir, &secret)
            .map_err(io_err("writing the server secret"))?,
        IndexLocation::Postgres(url) => {
            let url = url.clone();
            tokio::task::spawn_blocking(move || PgIndex::open(&url)?.replace_secret(&secret))
                .await
                .map_err(|e| BackupError::Task(e.to_string()))??
        }
    }
    eprintln!("restore: loading the index");
    let writer = index.clone();
    tokio::task::spawn_blocking(move || writer.load(&dump))
        .await
        .map_err(|e| BackupError::Task(e.to_string()))??;
    for repo in &manifest.repositories {
        let name = RepoName::parse(&repo.name)
            .map_err(|e| BackupError::Damaged(format!("the manifest lists repository {e}")))?;
        let reader = index.clone();
        let lookup = name.clone();
        let private = tokio::task::spawn_blocking(move || reader.repo_private(&lookup))
            .await
            .map_err(|e| BackupError::Task(e.to_string()))??;
        git::record_visibility(&opts.repos_root, &name, private).await?;
    }
    Ok(RestoreReport {
        snapshot: manifest.name,
        objects: total,
        repositories: manifest.repositories.len(),
    })
}
