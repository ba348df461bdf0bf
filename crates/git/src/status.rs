//! `git xet status`: whether git-xet is in use for the current repository, what the
//! remote's LFS server offers, the local XET state, and the XET hash of each LFS file.

use std::path::Path;

use crate::credentials;
use crate::endpoint::{self, Source};
use crate::install::{KEY_ARGS, KEY_PATH};
use crate::lfs_objects::tracked_files;
use crate::repo::Repo;
use crate::GitError;
use git_xet_client::records::RecordStore;
use git_xet_io::human::human_bytes;
use git_xet_lfs::pointer::Oid;
use git_xet_lfs::protocol::Operation;

pub fn run(remote: Option<&str>, offline: bool) -> Result<(), GitError> {
    let repo = Repo::current()?;
    let config = repo.config();

    // The agent, and which config file it comes from.
    match config
        .git()
        .try_run(["config", "--show-scope", "--get", KEY_PATH])?
    {
        Some(line) => {
            let (scope, path) = line.split_once('\t').unwrap_or(("?", line.as_str()));
            let args = config.get(None, KEY_ARGS)?.unwrap_or_default();
            let usable = Path::new(path).is_file() || which(path);
            println!(
                "agent:          configured ({scope} config): {path} {args}{}",
                if usable {
                    ""
                } else {
                    "  [program not found: run `git xet install` again]"
                }
            );
        }
        None => println!("agent:          not configured (run `git xet install`)"),
    }
    let filter = config.get(None, "filter.lfs.process")?;
    println!(
        "filter:         {}",
        match filter {
            Some(_) if crate::install::filter_is_ours(&config)? => "git-xet filter-process",
            Some(_) => "git-lfs filter-process (`git xet install` makes checkouts faster)",
            None => "missing (run `git xet install` or `git lfs install`)",
        }
    );

    // Each remote's LFS endpoint, how it authenticates and which way transfers go.
    let remotes: Vec<String> = match remote {
        Some(r) => vec![r.to_string()],
        None => repo
            .git()
            .run(["remote"])?
            .lines()
            .map(str::to_string)
            .collect(),
    };
    if remotes.is_empty() {
        println!("remote:         none");
    }
    for remote in &remotes {
        println!("remote:         {remote}");
        let source = match endpoint::source(&repo, remote, Operation::Download) {
            Ok(s) => s,
            Err(e) => {
                println!("  (cannot read its configuration: {e})");
                continue;
            }
        };
        let shown = match &source {
            Source::Http(url) | Source::Other(url) => credentials::strip_userinfo(url),
            Source::Ssh {
                remote, fallback, ..
            } => format!(
                "named by git-lfs-authenticate on {} (else {fallback})",
                remote.display_host()
            ),
        };
        println!("LFS endpoint:   {shown}");
        println!("authentication: {}", source.auth_method());
        if !offline {
            let (path, offers) = transfer_path(&repo, remote);
            println!("transfers:      {path}");
            println!("offers xet:     {offers}");
        }
    }

    // Local XET state.
    let xet_dir = repo.xet_dir();
    let shards = dir_size(&xet_dir.join("servers"));
    println!(
        "shard cache:    {} in {}",
        human_bytes(shards),
        xet_dir.display()
    );

    // Tracked files and their XET hashes.
    let files = tracked_files(&repo, "HEAD")?;
    let records = RecordStore::new(&xet_dir);
    println!("LFS files in HEAD: {}", files.len());
    for f in &files {
        let object = repo.lfs_object_path(&f.oid);
        // Known from a transfer, else computed from the local copy, else unknown.
        let xet = records
            .file_hash_for_sha256(&f.oid.0)
            .map(|h| h.to_hex())
            .or_else(|| {
                let file = std::fs::File::open(&object).ok()?;
                Some(
                    git_xet_io::pipeline::hash_stream(file, false)
                        .ok()?
                        .file_hash
                        .to_hex(),
                )
            });
        match xet {
            Some(h) => println!("  {h}  {:>10}  {}", human_bytes(f.size), f.path),
            None => println!(
                "  {:64}  {:>10}  {}  (not local: `git lfs pull` first)",
                "?",
                human_bytes(f.size),
                f.path
            ),
        }
    }
    Ok(())
}

/// Which way a download from `remote` goes (xet, or git-lfs and why), and whether the
/// server offers xet, from one Batch API request offering `basic` and `xet`.
fn transfer_path(repo: &Repo, remote: &str) -> (String, String) {
    let handoff = |why: String| format!("git-lfs (hand-off: {why})");
    let resolved = match endpoint::resolve(repo, remote, Operation::Download) {
        Ok(Some(r)) => r,
        Ok(None) => {
            let why = "the LFS endpoint is not an HTTP server".to_string();
            return (handoff(why), "no (not an HTTP server)".into());
        }
        Err(e @ GitError::SshAuthenticate { .. }) => {
            return (handoff(e.to_string()), format!("unknown ({e})"));
        }
        Err(e) => return (handoff(e.to_string()), format!("unknown ({e})")),
    };
    let answer = resolved.batch_client().and_then(|client| {
        let rt = git_xet_client::runtime::handle().map_err(GitError::Runtime)?;
        Ok(rt.block_on(client.batch(
            Operation::Download,
            &["basic", "xet"],
            &[(Oid([0; 32]), 0)],
        ))?)
    });
    match answer {
        Ok(a) if a.transfer == "xet" => ("xet".into(), "yes".into()),
        Ok(a) => (
            handoff(format!("the server chose `{}`", a.transfer)),
            format!("no (the server chose `{}`)", a.transfer),
        ),
        Err(e) => (
            handoff(format!("LFS batch request failed: {e}")),
            format!("unknown ({e})"),
        ),
    }
}

fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
}
