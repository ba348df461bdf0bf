//! Load generator for `scripts/bench_server.sh`: sends N bytes of new random data to a
//! running `git xet server` as xorbs plus a shard, then reads it back through the
//! reconstruction API and its fetch URLs, and through a git-lfs `basic` download (which the
//! server decodes itself). Prints throughput for each phase; everything is checked.
//!
//! Usage: bench_server URL TOKEN REPO SIZE_BYTES CONCURRENCY [SERVER_PID]
//!
//! With the server's pid (same machine), also prints the CPU time the server spent per
//! phase, which stays meaningful when other work competes for the cores.

use std::sync::Arc;
use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use git_xet_core::chunker::chunk_lengths;
use git_xet_core::hash::{chunk_hash, file_hash, sha256_as_merkle, sha256_hex, verification_hash};
use git_xet_core::reconstruction::Reconstruction;
use git_xet_core::shard::{FileInfo, FileTerm, Shard, XorbBlock};
use git_xet_core::xorb::{CompressedChunk, SerializedXorb, XorbBuilder};
use sha2::Digest;

type Error = Box<dyn std::error::Error + Send + Sync>;

#[path = "../crates/core/tests/support/random.rs"]
#[allow(dead_code)]
mod random;
use random::random_bytes;

/// Chunks, compresses (on every core) and packs the data into full xorbs.
fn build_xorbs(data: &[u8]) -> Vec<SerializedXorb> {
    let mut chunks = Vec::new();
    let mut pos = 0;
    for len in chunk_lengths(data) {
        chunks.push(&data[pos..pos + len]);
        pos += len;
    }
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let per = chunks.len().div_ceil(threads);
    let compressed: Vec<CompressedChunk> = std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .chunks(per.max(1))
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|c| CompressedChunk::new(chunk_hash(c), c))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let mut xorbs = Vec::new();
    let mut builder = XorbBuilder::new();
    for c in &compressed {
        if !builder.fits(c.record_len()) {
            xorbs.push(std::mem::take(&mut builder).finish());
        }
        builder.push(c).unwrap();
    }
    if !builder.is_empty() {
        xorbs.push(builder.finish());
    }
    xorbs
}

fn shard_for(data: &[u8], xorbs: &[SerializedXorb]) -> (Shard, git_xet_core::MerkleHash) {
    let mut terms = Vec::new();
    let mut verification = Vec::new();
    let mut all = Vec::new();
    let mut blocks = Vec::new();
    for x in xorbs {
        let f = &x.footer;
        let n = f.num_chunks();
        terms.push(FileTerm {
            xorb_hash: x.hash,
            cas_flags: 0,
            unpacked_bytes: f.unpacked_len() as u32,
            chunk_start: 0,
            chunk_end: n as u32,
        });
        verification.push(verification_hash(f.chunk_hashes.iter()));
        all.extend((0..n).map(|i| (f.chunk_hashes[i], u64::from(f.unpacked_chunk_len(i)))));
        blocks.push(XorbBlock::from_chunks(
            x.hash,
            (0..n).map(|i| (f.chunk_hashes[i], f.unpacked_chunk_len(i))),
            0,
        ));
    }
    let digest: [u8; 32] = sha2::Sha256::digest(data).into();
    let file_hash = file_hash(all);
    let file = FileInfo {
        file_hash,
        terms,
        verification: Some(verification),
        sha256: Some(sha256_as_merkle(&digest)),
    };
    (
        Shard {
            files: vec![file],
            xorbs: blocks,
        },
        file_hash,
    )
}

/// CPU seconds (user + system) a process has used so far.
fn cpu_secs(pid: Option<u32>) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid?)).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(ticks / hz)
}

/// "  (server CPU 1.23 s, 0.45 s/GB)" for a phase that moved `bytes`.
fn cpu_note(pid: Option<u32>, before: Option<f64>, bytes: u64) -> String {
    match (cpu_secs(pid), before) {
        (Some(after), Some(before)) => {
            let used = after - before;
            format!(
                "  (server CPU {used:.2} s, {:.2} s/GB)",
                used / (bytes as f64 / 1e9)
            )
        }
        _ => String::new(),
    }
}

fn mbps(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / 1e6 / secs
}

async fn check(response: reqwest::Response) -> Result<reqwest::Response, Error> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    Err(format!(
        "HTTP {status}: {}",
        response.text().await.unwrap_or_default()
    )
    .into())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 6 && args.len() != 7 {
        return Err(
            "usage: bench_server URL TOKEN REPO SIZE_BYTES CONCURRENCY [SERVER_PID]".into(),
        );
    }
    let pid: Option<u32> = args.get(6).map(|p| p.parse()).transpose()?;
    let (url, token, repo) = (args[1].clone(), args[2].clone(), args[3].clone());
    let size: usize = args[4].parse()?;
    let concurrency: usize = args[5].parse()?;

    let prep = Instant::now();
    let data = Arc::new(random_bytes(size, std::process::id() as u64 ^ 0x5eed));
    let xorbs = Arc::new(build_xorbs(&data));
    let (shard, file_hash) = shard_for(&data, &xorbs);
    // Bodies shared with the requests without copying.
    let bodies: Arc<Vec<bytes::Bytes>> = Arc::new(
        xorbs
            .iter()
            .map(|x| bytes::Bytes::from(x.bytes.clone()))
            .collect(),
    );
    let xorb_bytes: u64 = xorbs.iter().map(|x| x.bytes.len() as u64).sum();
    eprintln!(
        "prepared {} MB in {} xorbs in {:.1}s",
        size / 1_000_000,
        xorbs.len(),
        prep.elapsed().as_secs_f64()
    );

    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .build()?;

    // Upload: every xorb, `concurrency` at a time, then the shard.
    let cpu = cpu_secs(pid);
    let started = Instant::now();
    futures::stream::iter(0..xorbs.len())
        .map(|i| {
            let (http, xorbs, url, token) =
                (http.clone(), xorbs.clone(), url.clone(), token.clone());
            let body = bodies[i].clone();
            async move {
                let x = &xorbs[i];
                let r = http
                    .post(format!("{url}/v1/xorbs/default/{}", x.hash))
                    .bearer_auth(&token)
                    .body(body)
                    .send()
                    .await?;
                check(r).await.map(|_| ())
            }
        })
        .buffer_unordered(concurrency)
        .try_collect::<Vec<()>>()
        .await?;
    let r = http
        .post(format!("{url}/v1/shards"))
        .bearer_auth(&token)
        .body(shard.to_upload_bytes())
        .send()
        .await?;
    check(r).await?;
    let upload_secs = started.elapsed().as_secs_f64();
    println!(
        "upload:   {} MB of xorbs in {upload_secs:.2}s = {:.0} MB/s{}",
        xorb_bytes / 1_000_000,
        mbps(xorb_bytes, upload_secs),
        cpu_note(pid, cpu, xorb_bytes)
    );

    // Download: reconstruction, then every fetch range, checked against what was sent.
    let cpu = cpu_secs(pid);
    let started = Instant::now();
    let r = http
        .get(format!("{url}/v1/reconstructions/{file_hash}"))
        .bearer_auth(&token)
        .send()
        .await?;
    let rec: Reconstruction = check(r).await?.json().await?;
    let fetches: Vec<_> = rec
        .fetch_info
        .iter()
        .flat_map(|(h, infos)| infos.iter().map(move |f| (*h, f.clone())))
        .collect();
    let fetched: u64 = futures::stream::iter(fetches)
        .map(|(hash, info)| {
            let (http, xorbs) = (http.clone(), xorbs.clone());
            async move {
                let r = http
                    .get(&info.url)
                    .header("Range", info.url_range.header_value())
                    .send()
                    .await?;
                let x = xorbs
                    .iter()
                    .find(|x| x.hash == hash)
                    .ok_or("unknown xorb in fetch info")?;
                let want = &x.bytes[info.url_range.start as usize..=info.url_range.end as usize];
                // Compared as it arrives, without collecting the body first.
                let mut stream = check(r).await?.bytes_stream();
                let mut got = 0usize;
                while let Some(part) = stream.next().await {
                    let part = part?;
                    if want.get(got..got + part.len()) != Some(&part[..]) {
                        return Err::<u64, Error>(
                            format!("xorb {hash} range came back different").into(),
                        );
                    }
                    got += part.len();
                }
                if got != want.len() {
                    return Err(format!("xorb {hash} range came back short").into());
                }
                Ok(got as u64)
            }
        })
        .buffer_unordered(concurrency)
        .try_fold(0u64, |acc, n| async move { Ok(acc + n) })
        .await?;
    let download_secs = started.elapsed().as_secs_f64();
    println!(
        "download: {} MB of xorb ranges in {download_secs:.2}s = {:.0} MB/s{}",
        fetched / 1_000_000,
        mbps(fetched, download_secs),
        cpu_note(pid, cpu, fetched)
    );

    // The server decoding the reconstruction itself (git-lfs basic download).
    let oid = sha256_hex(&sha2::Sha256::digest(&data[..]).into());
    let cpu = cpu_secs(pid);
    let started = Instant::now();
    let r = http
        .get(format!("{url}/{repo}.git/info/lfs/objects/{oid}"))
        .bearer_auth(&token)
        .send()
        .await?;
    let mut stream = check(r).await?.bytes_stream();
    let mut hasher = sha2::Sha256::new();
    let mut got = 0u64;
    while let Some(part) = stream.next().await {
        let part = part?;
        got += part.len() as u64;
        hasher.update(&part);
    }
    let basic_secs = started.elapsed().as_secs_f64();
    let digest: [u8; 32] = hasher.finalize().into();
    if got != size as u64 || sha256_hex(&digest) != oid {
        return Err("basic download came back different".into());
    }
    println!(
        "basic:    {} MB decoded by the server in {basic_secs:.2}s = {:.0} MB/s{}",
        got / 1_000_000,
        mbps(got, basic_secs),
        cpu_note(pid, cpu, got)
    );
    Ok(())
}
