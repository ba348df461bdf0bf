//! `git xet server backup verify`: every file of a snapshot against the manifest's size and
//! sha256, every object it needs present with its size (and with `read_data`, its sha256).

use std::collections::HashMap;

use futures::StreamExt;

use super::{io_err, load_manifest, sha256_hex, snapshot_key, BackupError, Dest, Progress};

#[derive(Debug, Default)]
pub struct VerifyReport {
    pub snapshot: String,
    pub files: usize,
    pub objects: usize,
    /// What is missing or damaged, one line each; empty when the snapshot is whole.
    pub problems: Vec<String>,
}

pub async fn verify(
    dest: &Dest,
    snapshot: Option<&str>,
    read_data: bool,
) -> Result<VerifyReport, BackupError> {
    let manifest = load_manifest(dest, snapshot).await?;
    let mut report = VerifyReport {
        snapshot: manifest.name.clone(),
        files: manifest.files.len(),
        objects: manifest.objects.len(),
        problems: Vec::new(),
    };
    for file in &manifest.files {
        let key = snapshot_key(&manifest.name, &file.path);
        match dest.get(&key).await {
            Ok(data) if data.len() as u64 != file.size => report.problems.push(format!(
                "damaged: {key} has {} bytes, the manifest says {}",
                data.len(),
                file.size
            )),
            Ok(data) if sha256_hex(&data) != file.sha256 => report.problems.push(format!(
                "damaged: {key} (sha256 differs from the manifest's)"
            )),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                report.problems.push(format!("missing: {key}"))
            }
            Err(e) => return Err(io_err(format!("reading {key}"))(e)),
        }
    }
    let sizes: HashMap<String, u64> = dest
        .list("objects")
        .await
        .map_err(io_err(format!("listing the objects in {dest}")))?
        .into_iter()
        .collect();
    let mut to_read = Vec::new();
    for object in &manifest.objects {
        match sizes.get(&object.key) {
            None => report.problems.push(format!("missing: {}", object.key)),
            Some(&size) if size != object.size => report.problems.push(format!(
                "damaged: {} has {size} bytes, the manifest says {}",
                object.key, object.size
            )),
            Some(_) if read_data => to_read.push(object),
            Some(_) => {}
        }
    }
    let total = to_read.len();
    let mut progress = Progress::new("verify: reading objects");
    let mut reads = futures::stream::iter(to_read.into_iter().map(|object| async move {
        let data = dest
            .get(&object.key)
            .await
            .map_err(io_err(format!("reading {}", object.key)))?;
        Ok::<_, BackupError>((sha256_hex(&data) != object.sha256).then(|| {
            format!(
                "damaged: {} (sha256 differs from the manifest's)",
                object.key
            )
        }))
    }))
    .buffer_unordered(4);
    let mut done = 0;
    while let Some(result) = reads.next().await {
        done += 1;
        report.problems.extend(result?);
        progress.tick(|| format!("{done}/{total}"));
    }
    Ok(report)
}
