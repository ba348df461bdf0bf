//! `git xet upload` and `git xet download`: the client engine from the command line.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};

use crate::common::logging;
use crate::common::terminal::{bar_callback, terminal_bar};
use git_xet_client::chunk_cache::{default_cache_root, DEFAULT_CHUNK_CACHE_BYTES};
use git_xet_client::{CasClient, ClientConfig, DownloadOptions, LocalSource, Token};
use git_xet_core::MerkleHash;
use git_xet_io::human::human_bytes;

/// How to reach the server and where to keep local state.
#[derive(clap::Args, Debug)]
pub struct ConnectArgs {
    /// CAS server URL (requests go to `<URL>/v1/...`).
    #[arg(long, env = "GIT_XET_ENDPOINT", value_name = "URL")]
    endpoint: String,
    /// Access token (e.g. from `git xet server token create`).
    #[arg(
        long,
        env = "GIT_XET_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    token: Option<String>,
    /// Shard cache (kept per server inside) and reconstruction records [default: the user
    /// cache directory, or $GIT_XET_CACHE_DIR].
    #[arg(long, value_name = "DIR")]
    metadata_dir: Option<PathBuf>,
    /// Chunk cache directory [default: `chunks` under the user cache directory].
    #[arg(long, value_name = "DIR")]
    chunk_cache: Option<PathBuf>,
    /// Chunk cache size limit in MiB.
    #[arg(long, value_name = "MIB", default_value_t = DEFAULT_CHUNK_CACHE_BYTES >> 20)]
    chunk_cache_size: u64,
    /// Do not use the chunk cache.
    #[arg(long)]
    no_chunk_cache: bool,
    /// Xorbs uploaded, or ranges fetched, at once.
    #[arg(long, value_name = "N")]
    concurrency: Option<usize>,
}

#[derive(clap::Args, Debug)]
pub struct UploadArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    /// Do not ask the server's global dedup.
    #[arg(long)]
    no_global_dedup: bool,
    /// Files to upload (in one session: they dedup against each other).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct DownloadArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    /// XET hash of the file.
    #[arg(value_name = "FILE_HASH")]
    file_hash: String,
    /// Where to write it (replaced only once the download is complete and verified).
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,
    /// Only bytes START..=END (inclusive, like HTTP).
    #[arg(long, value_name = "START-END")]
    range: Option<String>,
    /// Fail unless the result has this sha256 (64 lowercase hex digits, as in LFS pointers).
    #[arg(long, value_name = "HEX")]
    sha256: Option<String>,
    /// A local file with chunks in common (e.g. an older version), reused when its
    /// reconstruction is recorded in the metadata directory. Repeatable.
    #[arg(long = "reuse", value_name = "FILE")]
    reuse: Vec<PathBuf>,
}

fn cache_root() -> Option<PathBuf> {
    default_cache_root()
}

fn config(c: &ConnectArgs) -> anyhow::Result<ClientConfig> {
    let mut config = ClientConfig::new(c.endpoint.trim_end_matches('/'));
    config.token = c.token.as_ref().map(|t| Token::new(t.trim(), None));
    let root = cache_root();
    config.metadata_dir = c.metadata_dir.clone().or_else(|| root.clone());
    if !c.no_chunk_cache {
        let dir = c
            .chunk_cache
            .clone()
            .or_else(|| root.as_ref().map(|r| r.join("chunks")));
        config.chunk_cache = dir.map(|d| (d, c.chunk_cache_size << 20));
    }
    if let Some(n) = c.concurrency {
        if n == 0 {
            bail!("--concurrency must be at least 1");
        }
        config.upload_concurrency = n;
        config.download_concurrency = n;
    }
    Ok(config)
}

/// The process's runtime (git_xet_io::runtime).
fn runtime() -> anyhow::Result<tokio::runtime::Handle> {
    git_xet_io::runtime::handle().context("starting the async runtime")
}

pub fn upload(args: UploadArgs) -> anyhow::Result<ExitCode> {
    logging::init("warn");
    let mut config = config(&args.connect)?;
    config.global_dedup = !args.no_global_dedup;
    let client = CasClient::new(config)?;
    let summary = runtime()?.block_on(async {
        let mut session = client.start_upload().await?;
        for path in &args.files {
            let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            let bar = terminal_bar(&path.display().to_string(), size);
            session
                .add_file(path, bar.clone().map(bar_callback))
                .await
                .with_context(|| format!("uploading {}", path.display()))?;
            if let Some(bar) = bar {
                bar.finish_and_clear();
            }
        }
        session.finish().await.context("finishing the upload")
    })?;
    let mut stdout = std::io::stdout().lock();
    for file in &summary.files {
        writeln!(stdout, "{}  {}", file.file_hash, file.name)?;
    }
    stdout.flush()?;
    eprintln!("{}", summary.stats);
    Ok(ExitCode::SUCCESS)
}

/// Parses `START-END` (both inclusive).
pub fn parse_range(text: &str) -> anyhow::Result<(u64, u64)> {
    let (s, e) = text
        .split_once('-')
        .with_context(|| format!("invalid range `{text}`: expected START-END"))?;
    let start: u64 = s
        .trim()
        .parse()
        .with_context(|| format!("invalid range start `{s}`"))?;
    let end: u64 = e
        .trim()
        .parse()
        .with_context(|| format!("invalid range end `{e}`"))?;
    if end < start {
        bail!("invalid range `{text}`: END is before START");
    }
    Ok((start, end))
}

pub fn download(args: DownloadArgs) -> anyhow::Result<ExitCode> {
    logging::init("warn");
    let file_hash = MerkleHash::from_hex(args.file_hash.trim()).context("invalid FILE_HASH")?;
    let range = args.range.as_deref().map(parse_range).transpose()?;
    let expected_sha256 = args
        .sha256
        .as_deref()
        .map(git_xet_core::lfs::parse_oid)
        .transpose()
        .context("invalid --sha256")?;
    let client = CasClient::new(config(&args.connect)?)?;
    let sources = args
        .reuse
        .iter()
        .map(|path| {
            let summary = git_xet_io::pipeline::hash_stream(
                std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?,
                false,
            )?;
            Ok(LocalSource {
                path: path.clone(),
                file_hash: Some(summary.file_hash),
                sha256: None,
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let bar = terminal_bar(&args.output.display().to_string(), 0);
    let options = DownloadOptions {
        range,
        expected_sha256,
        sources,
        progress: bar.clone().map(bar_callback),
        tap: None,
        shared: None,
    };
    let outcome = runtime()?
        .block_on(client.download(&file_hash, &args.output, options))
        .with_context(|| format!("downloading {file_hash}"))?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    eprintln!(
        "wrote {} to {} ({} fetched, {} from the chunk cache, {} from local files){}",
        human_bytes(outcome.bytes_written),
        args.output.display(),
        human_bytes(outcome.network_bytes),
        human_bytes(outcome.cache_bytes),
        human_bytes(outcome.local_bytes),
        if outcome.file_hash_verified {
            "; verified"
        } else {
            ""
        }
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_inclusive_and_checked() {
        assert_eq!(parse_range("0-99").unwrap(), (0, 99));
        assert_eq!(parse_range("5-5").unwrap(), (5, 5));
        assert!(parse_range("9-5").is_err());
        assert!(parse_range("5").is_err());
        assert!(parse_range("a-5").is_err());
    }
}
