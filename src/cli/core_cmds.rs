//! Protocol-core commands: chunk, hash, xorb pack/inspect/extract, shard inspect.
//! Their output forms are fixed; scripts and tests rely on them.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};

use git_xet_core::constants::{MAX_XORB_BODY, MAX_XORB_CHUNKS};
use git_xet_core::hash::sha256_hex;
use git_xet_core::shard::parse_shard;
use git_xet_core::xorb::{extract_chunks, inspect_xorb, CompressedChunk, XorbBuilder, XorbFooter};
use git_xet_io::pipeline::{
    chunk_and_hash, chunk_and_hash_file, HashedChunk, PipelineError, StreamSummary,
};
use git_xet_io::platform::mmap::Mapper;

#[derive(clap::Args, Debug)]
pub struct ChunkArgs {
    /// File to chunk; `-` or nothing reads stdin.
    file: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct HashArgs {
    /// Files to hash (`-` reads stdin).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Also print each file's sha256 as a third column.
    #[arg(long)]
    sha256: bool,
}

#[derive(clap::Subcommand, Debug)]
pub enum XorbCommand {
    /// Pack the chunks of the given files, in order, into one xorb.
    Pack {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Where to write the xorb.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Show a xorb's hash, chunks, sizes and compression, and whether they verify.
    Inspect {
        xorb: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Write the decompressed bytes of a range of chunks.
    Extract {
        xorb: PathBuf,
        /// Chunk range `START..END` (END exclusive; either side may be omitted).
        #[arg(long)]
        chunks: Option<String>,
        #[arg(short, long)]
        output: PathBuf,
    },
}

#[derive(clap::Subcommand, Debug)]
pub enum ShardCommand {
    /// Show every file and xorb in a shard, its footer, and whether its lookup tables agree.
    Inspect {
        shard: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

/// An input: a file, or stdin for `-`.
enum Input {
    File(File),
    Stdin,
}

fn open_input(path: &Path) -> anyhow::Result<Input> {
    if path.as_os_str() == "-" {
        return Ok(Input::Stdin);
    }
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    if file.metadata().map(|m| m.is_dir()).unwrap_or(false) {
        bail!("{} is a directory", path.display());
    }
    Ok(Input::File(file))
}

impl Input {
    /// Chunks and hashes the whole input, handing each chunk to `sink`.
    fn chunk<E>(
        self,
        want_sha256: bool,
        sink: impl FnMut(HashedChunk) -> Result<(), E>,
    ) -> Result<StreamSummary, PipelineError<E>> {
        match self {
            // A file the user named: read, never mapped (see `Mapper`).
            Input::File(file) => chunk_and_hash_file(&file, Mapper::reading(), want_sha256, sink),
            Input::Stdin => chunk_and_hash(io::stdin(), want_sha256, sink),
        }
    }
}

/// Writes `bytes` to `path` atomically: a temporary file next to it, then a rename.
fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // 0666 before the umask, like any file the user creates (tempfile defaults to 0600).
    let mut tmp = tempfile::Builder::new()
        .prefix(".git-xet-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(
            0o666 & !git_xet_io::platform::process::umask(),
        ))
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a file in {}", dir.display()))?;
    tmp.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))?;
    tmp.persist(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

fn read_limited(path: &Path, limit: u64, what: &str) -> anyhow::Result<Vec<u8>> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let len = file.metadata()?.len();
    if len > limit {
        bail!(
            "{} is {len} bytes, larger than any valid {what} ({limit} bytes)",
            path.display()
        );
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(limit)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading {}", path.display()))?;
    Ok(bytes)
}

pub fn chunk(args: ChunkArgs) -> anyhow::Result<ExitCode> {
    let path = args.file.unwrap_or_else(|| PathBuf::from("-"));
    let input = open_input(&path)?;
    let mut out = BufWriter::new(io::stdout().lock());
    let result = input.chunk(false, |c| writeln!(out, "{} {}", c.hash, c.data.len()));
    match result {
        Ok(_) => {}
        Err(PipelineError::Read(e)) => {
            return Err(e).context(format!("reading {}", path.display()))
        }
        Err(PipelineError::Sink(e)) => return Err(e.into()),
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

pub fn hash(args: HashArgs) -> anyhow::Result<ExitCode> {
    crate::common::logging::init("warn");
    let mut out = BufWriter::new(io::stdout().lock());
    for path in &args.files {
        let input = open_input(path)?;
        let summary = match input.chunk(args.sha256, |_| Ok::<(), std::convert::Infallible>(())) {
            Ok(s) => s,
            Err(PipelineError::Read(e)) => {
                return Err(e).context(format!("reading {}", path.display()))
            }
            Err(PipelineError::Sink(never)) => match never {},
        };
        match summary.sha256 {
            Some(sha) => writeln!(
                out,
                "{}  {}  {}",
                summary.file_hash,
                path.display(),
                sha256_hex(&sha)
            )?,
            None => writeln!(out, "{}  {}", summary.file_hash, path.display())?,
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

pub fn xorb(cmd: XorbCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        XorbCommand::Pack { files, output } => xorb_pack(&files, &output),
        XorbCommand::Inspect { xorb, json } => xorb_inspect(&xorb, json),
        XorbCommand::Extract {
            xorb,
            chunks,
            output,
        } => xorb_extract(&xorb, chunks.as_deref(), &output),
    }
}

fn xorb_pack(files: &[PathBuf], output: &Path) -> anyhow::Result<ExitCode> {
    let mut builder = XorbBuilder::new();
    for path in files {
        let input = open_input(path)?;
        let result = input.chunk(false, |c| {
            builder.push(&CompressedChunk::new(c.hash, &c.data))
        });
        match result {
            Ok(_) => {}
            Err(PipelineError::Read(e)) => {
                return Err(e).context(format!("reading {}", path.display()))
            }
            Err(PipelineError::Sink(e)) => {
                bail!(
                    "the files do not fit in one xorb while packing {}: {e}",
                    path.display()
                )
            }
        }
    }
    if builder.is_empty() {
        bail!("the files are empty: a xorb needs at least one chunk");
    }
    let xorb = builder.finish();
    write_atomically(output, &xorb.bytes)?;
    println!("{}", xorb.hash);
    Ok(ExitCode::SUCCESS)
}

/// The largest xorb file read: what the server accepts, plus the footer it appends to a
/// footer-less body (a stored xorb can be inspected).
const MAX_XORB_FILE: u64 = (MAX_XORB_BODY + XorbFooter::encoded_len(MAX_XORB_CHUNKS) + 4) as u64;

fn xorb_inspect(path: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let bytes = read_limited(path, MAX_XORB_FILE, "xorb")?;
    let report =
        inspect_xorb(&bytes).with_context(|| format!("{} is not a valid xorb", path.display()))?;
    let mut out = BufWriter::new(io::stdout().lock());
    if json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        let counts: Vec<String> = report
            .compression_counts
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect();
        writeln!(out, "xorb:          {}", report.hash)?;
        if report.hash_verified {
            writeln!(out, "hash:          verified (matches the chunk hashes)")?;
        } else {
            writeln!(
                out,
                "hash:          MISMATCH: the chunk hashes give {}",
                report.computed_hash
            )?;
        }
        writeln!(
            out,
            "chunks:        {} ({})",
            report.num_chunks,
            counts.join(", ")
        )?;
        writeln!(
            out,
            "chunk data:    {}",
            if report.chunks_verified {
                "verified (every chunk decodes to its hash)"
            } else {
                "DAMAGED"
            }
        )?;
        writeln!(
            out,
            "size:          {} bytes, {} uncompressed",
            report.serialized_size, report.uncompressed_size
        )?;
        writeln!(
            out,
            "{:>5}  {:<64}  {:>9}  {:>7}  {:>7}  {:<8}  ok",
            "index", "chunk hash", "offset", "stored", "size", "scheme"
        )?;
        for c in &report.chunks {
            writeln!(
                out,
                "{:>5}  {}  {:>9}  {:>7}  {:>7}  {:<8}  {}",
                c.index,
                c.hash,
                c.offset,
                c.stored_size,
                c.uncompressed_size,
                c.compression,
                if c.verified { "yes" } else { "NO" }
            )?;
        }
    }
    out.flush()?;
    if !report.hash_verified || !report.chunks_verified {
        bail!("{} does not verify", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Parses `START..END`, either side optional, against `n` chunks.
fn parse_chunk_range(spec: Option<&str>, n: usize) -> anyhow::Result<(usize, usize)> {
    let Some(spec) = spec else { return Ok((0, n)) };
    let (a, b) = spec
        .split_once("..")
        .with_context(|| format!("chunk range {spec:?} should look like START..END"))?;
    let parse = |s: &str, default: usize| -> anyhow::Result<usize> {
        if s.is_empty() {
            Ok(default)
        } else {
            s.trim()
                .parse()
                .with_context(|| format!("{s:?} in chunk range {spec:?} is not a number"))
        }
    };
    let (start, end) = (parse(a, 0)?, parse(b, n)?);
    if start >= end || end > n {
        bail!("chunk range {start}..{end} is empty or outside the xorb's {n} chunks");
    }
    Ok((start, end))
}

fn xorb_extract(path: &Path, chunks: Option<&str>, output: &Path) -> anyhow::Result<ExitCode> {
    let bytes = read_limited(path, MAX_XORB_FILE, "xorb")?;
    let footer = XorbFooter::parse(&bytes)
        .with_context(|| format!("{} is not a valid xorb", path.display()))?;
    let (start, end) = parse_chunk_range(chunks, footer.num_chunks())?;
    let data = extract_chunks(&bytes, &footer, start, end)
        .with_context(|| format!("extracting chunks {start}..{end} of {}", path.display()))?;
    write_atomically(output, &data)?;
    Ok(ExitCode::SUCCESS)
}

pub fn shard(cmd: ShardCommand) -> anyhow::Result<ExitCode> {
    let ShardCommand::Inspect { shard: path, json } = cmd;
    let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let parsed =
        parse_shard(&bytes).with_context(|| format!("{} is not a valid shard", path.display()))?;
    let problems = parsed.lookup_problems();
    let mut out = BufWriter::new(io::stdout().lock());
    if json {
        let value = serde_json::json!({
            "application_id": parsed.application_id,
            "files": parsed.shard.files.iter().map(|f| serde_json::json!({
                "hash": f.file_hash,
                "size": f.size(),
                "terms": f.terms,
                "verification": f.verification,
                "sha256": f.sha256,
            })).collect::<Vec<_>>(),
            "xorbs": parsed.shard.xorbs,
            "footer": parsed.footer,
            "lookup_tables": parsed.lookups.as_ref().map(|_| serde_json::json!({
                "consistent": problems.is_empty(),
                "problems": problems,
            })),
        });
        serde_json::to_writer_pretty(&mut out, &value)?;
        writeln!(out)?;
    } else {
        let s = &parsed.shard;
        writeln!(
            out,
            "shard:       {} ({} bytes, application {:?})",
            path.display(),
            bytes.len(),
            parsed.application_id
        )?;
        writeln!(
            out,
            "form:        {}",
            if parsed.footer.is_some() {
                "stored (with footer)"
            } else {
                "upload (no footer)"
            }
        )?;
        writeln!(out, "files:       {}", s.files.len())?;
        for f in &s.files {
            writeln!(
                out,
                "  file {}  {} bytes, {} terms",
                f.file_hash,
                f.size(),
                f.terms.len()
            )?;
            if let Some(sha) = &f.sha256 {
                writeln!(out, "    sha256 {sha}")?;
            }
            for (i, t) in f.terms.iter().enumerate() {
                let v = f
                    .verification
                    .as_ref()
                    .map(|v| v[i].to_string())
                    .unwrap_or_else(|| "-".into());
                writeln!(
                    out,
                    "    term {i}: xorb {} chunks {}..{} ({} bytes) verification {v}",
                    t.xorb_hash, t.chunk_start, t.chunk_end, t.unpacked_bytes
                )?;
            }
        }
        writeln!(out, "xorbs:       {}", s.xorbs.len())?;
        for x in &s.xorbs {
            writeln!(
                out,
                "  xorb {}  {} chunks, {} bytes, {} on disk, flags {:#x}",
                x.xorb_hash,
                x.chunks.len(),
                x.num_bytes_in_xorb,
                x.num_bytes_on_disk,
                x.cas_flags
            )?;
            for (i, c) in x.chunks.iter().enumerate() {
                writeln!(
                    out,
                    "    chunk {i}: {} at {} ({} bytes) flags {:#x}",
                    c.chunk_hash, c.byte_range_start, c.unpacked_bytes, c.flags
                )?;
            }
        }
        if let Some(f) = &parsed.footer {
            writeln!(out, "footer:")?;
            writeln!(
                out,
                "  version {}, file info at {}, CAS info at {}",
                f.version, f.file_info_offset, f.cas_info_offset
            )?;
            writeln!(
                out,
                "  lookups: {} files at {}, {} xorbs at {}, {} chunks at {}",
                f.file_lookup_num_entries,
                f.file_lookup_offset,
                f.cas_lookup_num_entries,
                f.cas_lookup_offset,
                f.chunk_lookup_num_entries,
                f.chunk_lookup_offset
            )?;
            writeln!(out, "  chunk hash key {}", f.chunk_hash_key)?;
            writeln!(
                out,
                "  created {} expires {}",
                f.creation_timestamp, f.key_expiry
            )?;
            writeln!(
                out,
                "  bytes: {} materialized, {} stored, {} on disk; footer at {}",
                f.materialized_bytes, f.stored_bytes, f.stored_bytes_on_disk, f.footer_offset
            )?;
            if problems.is_empty() {
                writeln!(out, "lookup tables: consistent")?;
            } else {
                writeln!(out, "lookup tables: INCONSISTENT")?;
                for p in &problems {
                    writeln!(out, "  {p}")?;
                }
            }
        }
    }
    out.flush()?;
    if !problems.is_empty() {
        bail!(
            "{}: lookup tables are inconsistent ({} problems)",
            path.display(),
            problems.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}
