//! Hostile requests against a real `git xet server` held to an address-space limit: each
//! class of request at its worst, while an honest client uploads. The server
//! must answer each (a clear 4xx, or 200 for what is valid), stay alive, keep its peak RSS
//! (VmHWM, reset before each class) under [`RSS_BOUND`], and serve the honest upload.
//!
//! `scripts/bench_hostile.sh` runs this suite with the figures printed (per class: peak RSS,
//! honest upload latency); docs/benchmarks.md quotes them.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use git_xet_core::hash::{file_hash, sha256_as_merkle, verification_hash};
use git_xet_core::shard::{FileInfo, FileTerm, Shard};
use git_xet_core::xorb::{SerializedXorb, XorbBuilder};
use git_xet_core::MerkleHash;

use crate::common::{block, client, Cas, Upload};
use crate::support::git_xet;

/// The server's address-space limit (`ulimit -v`): the 5 GB allocation a shard once asked
/// for fails under it, and the process dies, as it did unlimited on a smaller machine.
const ADDRESS_SPACE: u64 = 3 << 30;
/// Peak resident memory allowed during any class.
const RSS_BOUND: u64 = 400 << 20;
/// Concurrent attackers per class (more where each holds a large body).
const ATTACKERS: usize = 4;
/// Honest uploads per class (the worst latency is reported).
const HONEST: usize = 3;

/// A server started under `ADDRESS_SPACE`, killed on drop.
struct Limited {
    child: Child,
    url: String,
    data: PathBuf,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Limited {
    fn start(args: &[&str]) -> Limited {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let ready = dir.path().join("ready");
        let log = dir.path().join("server.log");
        // Another build (the release binary, an older version) when asked for.
        let mut cmd = match std::env::var_os("GIT_XET_HOSTILE_BIN") {
            Some(bin) => std::process::Command::new(bin),
            None => git_xet(),
        };
        cmd.arg("server")
            .args(["--listen", "127.0.0.1:0", "--no-fsync", "--data"])
            .arg(&data)
            .arg("--ready-file")
            .arg(&ready)
            .args(args)
            // Two malloc arenas: each reserves 64 MiB of address space, and the limit is
            // about what the server allocates, not how glibc reserves.
            .env("MALLOC_ARENA_MAX", "2")
            .env("GIT_XET_LOG_LEVEL", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                let limit = libc::rlimit {
                    rlim_cur: ADDRESS_SPACE,
                    rlim_max: ADDRESS_SPACE,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let url = loop {
            if let Ok(url) = std::fs::read_to_string(&ready) {
                if !url.trim().is_empty() {
                    break url.trim().to_string();
                }
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "server exited with {status}: {}",
                    std::fs::read_to_string(&log).unwrap()
                );
            }
            assert!(Instant::now() < deadline, "server not ready");
            std::thread::sleep(Duration::from_millis(20));
        };
        Limited {
            child,
            url,
            data,
            log,
            _dir: dir,
        }
    }

    fn token(&self, repo: &str, scope: &str) -> String {
        let out = git_xet()
            .args([
                "server", "token", "create", "--repo", repo, "--scope", scope,
            ])
            .arg("--data")
            .arg(&self.data)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    fn cas(&self, token: &str) -> Cas {
        Cas {
            base: self.url.clone(),
            token: token.to_string(),
            http: client(),
        }
    }

    fn addr(&self) -> SocketAddr {
        self.url.trim_start_matches("http://").parse().unwrap()
    }

    fn status_field(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status
            .lines()
            .find(|l| l.starts_with(field))
            .unwrap_or_else(|| panic!("{field} in /proc/PID/status"));
        let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kb * 1024
    }

    /// Resets the peak RSS (VmHWM) to the current RSS.
    fn reset_peak(&self) {
        std::fs::write(format!("/proc/{}/clear_refs", self.child.id()), "5").unwrap();
    }

    fn assert_alive(&mut self, class: &str) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!(
                "{class}: the server died ({status}); log:\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
        let r = client().get(format!("{}/health", self.url)).send();
        assert!(
            r.is_ok_and(|r| r.status() == 200),
            "{class}: /health does not answer"
        );
    }
}

impl Drop for Limited {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one class measured.
struct Figures {
    class: &'static str,
    peak_rss: u64,
    honest_worst: Duration,
    attacks: usize,
}

/// Runs `attack` from `attackers` threads until the honest uploads are done; each attack
/// returns its HTTP status, which must be `expected`. Returns the figures.
fn run_class(
    server: &mut Limited,
    honest: &Cas,
    class: &'static str,
    attackers: usize,
    expected: u16,
    attack: impl Fn() -> u16 + Send + Sync + 'static,
) -> Figures {
    server.reset_peak();
    let attack = Arc::new(attack);
    let stop = Arc::new(AtomicBool::new(false));
    let statuses = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..attackers)
        .map(|_| {
            let (attack, stop, statuses) = (attack.clone(), stop.clone(), statuses.clone());
            std::thread::spawn(move || {
                // Every attacker lands at least one request, however fast the honest side.
                loop {
                    let status = attack();
                    statuses.lock().unwrap().push(status);
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                }
            })
        })
        .collect();
    // Let the attack get going before the honest client starts.
    std::thread::sleep(Duration::from_millis(300));
    let mut worst = Duration::ZERO;
    for i in 0..HONEST {
        let upload = Upload::random(
            256 << 10,
            0xC0FFEE + i as u64 + class.len() as u64 * 1000,
            64,
        );
        let started = Instant::now();
        honest.upload(&upload);
        worst = worst.max(started.elapsed());
        assert_eq!(
            honest.download(&upload.file_hash, None),
            upload.data,
            "{class}"
        );
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("attacker thread");
    }
    server.assert_alive(class);
    let statuses = statuses.lock().unwrap();
    assert!(
        statuses.iter().all(|&s| s == expected),
        "{class}: statuses {statuses:?}, expected {expected}"
    );
    let figures = Figures {
        class,
        peak_rss: server.status_field("VmHWM:"),
        honest_worst: worst,
        attacks: statuses.len(),
    };
    eprintln!(
        "hostile: {:<32} peak RSS {:>4} MiB   honest upload worst {:>5} ms   ({} attacks)",
        figures.class,
        figures.peak_rss >> 20,
        figures.honest_worst.as_millis(),
        figures.attacks
    );
    assert!(
        figures.peak_rss < RSS_BOUND,
        "{class}: peak RSS {} MiB over the bound of {} MiB",
        figures.peak_rss >> 20,
        RSS_BOUND >> 20
    );
    figures
}

/// A valid xorb of `n` one-byte chunks (the most chunks a xorb may hold is 8192).
fn tiny_chunk_xorb(n: usize) -> SerializedXorb {
    let mut b = XorbBuilder::new();
    for i in 0..n {
        b.push_data(&[(i % 251) as u8]).unwrap();
    }
    b.finish()
}

/// A file of `terms`, each chunk range `range(i)` of `xorb`, with correct verification and
/// sha256 entries, and a file hash that is right when `real_hash` (else zero: it is checked
/// last, after everything a server allocates).
fn file_over(
    xorb: &SerializedXorb,
    terms: usize,
    range: impl Fn(usize) -> (u32, u32),
    real_hash: bool,
) -> FileInfo {
    let f = &xorb.footer;
    let mut file = FileInfo {
        file_hash: MerkleHash::ZERO,
        terms: Vec::with_capacity(terms),
        verification: Some(Vec::with_capacity(terms)),
        sha256: Some(MerkleHash::from_bytes([7; 32])),
    };
    let mut chunks = Vec::new();
    for i in 0..terms {
        let (s, e) = range(i);
        let unpacked: u32 = (s..e).map(|c| f.unpacked_chunk_len(c as usize)).sum();
        file.terms.push(FileTerm {
            xorb_hash: xorb.hash,
            cas_flags: 0,
            unpacked_bytes: unpacked,
            chunk_start: s,
            chunk_end: e,
        });
        let hashes = &f.chunk_hashes[s as usize..e as usize];
        file.verification
            .as_mut()
            .unwrap()
            .push(verification_hash(hashes));
        if real_hash {
            chunks.extend((s..e).map(|c| {
                (
                    f.chunk_hashes[c as usize],
                    u64::from(f.unpacked_chunk_len(c as usize)),
                )
            }));
        }
    }
    if real_hash {
        file.file_hash = file_hash(chunks);
        file.sha256 = Some(sha256_as_merkle(&[9; 32]));
    }
    file
}

fn post(url: &str, token: &str, body: bytes::Bytes, headers: &[(&str, &str)]) -> u16 {
    let mut request = client().post(url).bearer_auth(token).body(body);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    match request.send() {
        Ok(r) => r.status().as_u16(),
        Err(e) => panic!("{url}: no answer: {e}"),
    }
}

#[test]
fn hostile_requests_leave_the_server_up_bounded_and_serving() {
    let mut server = Limited::start(&[]);
    let write = server.token("org/attacker", "write");
    let honest = server.cas(&server.token("org/honest", "write"));
    let attacker = server.cas(&write);
    let xorb = Arc::new(tiny_chunk_xorb(8192));
    attacker.post_xorb(&xorb);
    let mut figures = Vec::new();

    // 1. A 1.9 MB shard whose one file repeats a xorb of 8192 tiny chunks 20,000 times:
    //    160 Mi chunk references (it once made the server allocate 5 GB and abort).
    let bomb = Shard {
        files: vec![file_over(&xorb, 20_000, |_| (0, 8192), false)],
        xorbs: vec![],
    }
    .to_upload_bytes();
    assert!(bomb.len() < 2 << 20, "{} bytes", bomb.len());
    let bomb = bytes::Bytes::from(bomb);
    let url = format!("{}/v1/shards", server.url);
    let token = write.clone();
    if wanted(1) {
        figures.push(run_class(
            &mut server,
            &honest,
            "shard repeating a xorb",
            ATTACKERS,
            413,
            move || post(&url, &token, bomb.clone(), &[]),
        ));
    }

    // 2. A file of more terms than a reconstruction may list.
    let many = Shard {
        files: vec![file_over(
            &xorb,
            70_000,
            |i| ((i % 8192) as u32, (i % 8192) as u32 + 1),
            false,
        )],
        xorbs: vec![],
    }
    .to_upload_bytes();
    let many = bytes::Bytes::from(many);
    let url = format!("{}/v1/shards", server.url);
    let token = write.clone();
    if wanted(2) {
        figures.push(run_class(
            &mut server,
            &honest,
            "shard of 70,000 terms",
            ATTACKERS,
            413,
            move || post(&url, &token, many.clone(), &[]),
        ));
    }

    // 3. Xorbs of the most chunks, each tiny: complete and footer-less (hf-xet's form).
    let x = xorb.clone();
    let att = server.cas(&write);
    if wanted(3) {
        figures.push(run_class(
            &mut server,
            &honest,
            "xorb of 8192 tiny chunks",
            ATTACKERS,
            200,
            move || {
                let body = if rand_bit() {
                    x.bytes.clone()
                } else {
                    x.bytes[..x.footer.data_len()].to_vec()
                };
                att.post_xorb_raw(&x.hash.to_hex(), body).status().as_u16()
            },
        ));
    }

    // 4. Reconstructions of a file of the most terms allowed, none of which merge: the
    //    answer lists 65,536 terms.
    let alternate = |i: usize| {
        let c = (2 * i % 8192) as u32;
        (c, c + 1)
    };
    let wide = file_over(&xorb, 1 << 16, alternate, true);
    let wide_hash = wide.file_hash;
    let shard = Shard {
        files: vec![wide],
        xorbs: vec![block(&xorb)],
    };
    assert_eq!(attacker.post_shard(&shard), 1);
    if wanted(4) {
        let answer = attacker.reconstruction_raw(&wide_hash.to_hex(), None);
        eprintln!(
            "hostile: a reconstruction of 65,536 terms answers {} bytes",
            answer.bytes().unwrap().len()
        );
    }
    let att = server.cas(&write);
    if wanted(4) {
        figures.push(run_class(
            &mut server,
            &honest,
            "reconstruction of 65,536 terms",
            ATTACKERS,
            200,
            move || {
                let r = att.reconstruction_raw(&wide_hash.to_hex(), None);
                let status = r.status().as_u16();
                let len = r.bytes().unwrap().len();
                assert!(len < 32 << 20, "a {len}-byte answer");
                status
            },
        ));
    }

    // 5. A gzip push body of 1 KiB zeros compressed 1000-fold, many times over: 512 MiB
    //    once inflated. git refuses it; the server must not inflate it into memory first.
    let gz = bytes::Bytes::from(gzip_zeros(512 << 20));
    let url = format!("{}/org/attacker.git/git-receive-pack", server.url);
    let token = write.clone();
    if wanted(5) {
        figures.push(run_class(
            &mut server,
            &honest,
            "gzip push body (512 MiB)",
            ATTACKERS,
            200,
            move || {
                post(
                    &url,
                    &token,
                    gz.clone(),
                    &[
                        ("Content-Encoding", "gzip"),
                        ("Content-Type", "application/x-git-receive-pack-request"),
                    ],
                )
            },
        ));
    }

    // 6. Shards of 48 MiB (not shards at all) sent at once by several clients: received
    //    to disk, validated a few at a time.
    let junk = bytes::Bytes::from(vec![0u8; 48 << 20]);
    let url = format!("{}/v1/shards", server.url);
    let token = write.clone();
    if wanted(6) {
        figures.push(run_class(
            &mut server,
            &honest,
            "48 MiB shard bodies",
            12,
            400,
            move || post(&url, &token, junk.clone(), &[]),
        ));
    }

    let vm_peak = server.status_field("VmPeak:");
    eprintln!(
        "hostile: address space peak {} MiB of the {} MiB limit",
        vm_peak >> 20,
        ADDRESS_SPACE >> 20
    );
}

/// Connections from many addresses, up to the global cap: the next one is closed, and once
/// they go, an honest client is served again.
#[test]
fn hostile_connections_from_many_addresses_meet_the_global_cap() {
    let mut server = Limited::start(&["--max-connections", "200"]);
    let honest = server.cas(&server.token("org/honest", "write"));
    let port = server.addr().port();
    let mut hogs = Vec::new();
    for i in 0..200u32 {
        let local: SocketAddr = format!("127.0.{}.{}:0", 1 + i / 200, 2 + i % 200)
            .parse()
            .unwrap();
        hogs.push(connect_from(local, port));
    }
    std::thread::sleep(Duration::from_millis(300));
    let mut extra = TcpStream::connect(server.addr()).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let _ = extra.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut buf = [0u8; 64];
    assert!(
        matches!(extra.read(&mut buf), Ok(0) | Err(_)),
        "a connection past the global cap is closed"
    );
    drop(hogs);
    // The server counts them out as it notices the closes: served again once it has.
    let started = Instant::now();
    let health = format!("{}/health", server.url);
    assert!(
        crate::common::wait_for(|| client()
            .get(&health)
            .send()
            .is_ok_and(|r| r.status() == 200)),
        "the server accepts connections again once the others close"
    );
    honest.upload(&Upload::random(256 << 10, 77, 64));
    server.assert_alive("connections");
    let peak = server.status_field("VmHWM:");
    eprintln!(
        "hostile: {:<32} peak RSS {:>4} MiB   honest upload after {:>5} ms",
        "200 connections, 200 addresses",
        peak >> 20,
        started.elapsed().as_millis()
    );
    assert!(peak < RSS_BOUND);
}

/// Whether class `n` runs: all unless `GIT_XET_HOSTILE_CLASSES` lists some (e.g. `2,5`),
/// to measure one class alone or an older build that dies on another.
fn wanted(n: usize) -> bool {
    std::env::var("GIT_XET_HOSTILE_CLASSES").map_or(true, |list| {
        list.split(',').any(|c| c.trim().parse() == Ok(n))
    })
}

/// A connection to 127.0.0.1:`port` from `local` (any 127/8 address is this host).
fn connect_from(local: SocketAddr, port: u16) -> TcpStream {
    let socket = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    assert!(socket >= 0);
    let sockaddr = |addr: SocketAddr| {
        let SocketAddr::V4(v4) = addr else {
            unreachable!()
        };
        libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: v4.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*v4.ip()).to_be(),
            },
            sin_zero: [0; 8],
        }
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    let from = sockaddr(local);
    let to = sockaddr(SocketAddr::from(([127, 0, 0, 1], port)));
    // SAFETY: plain socket calls on a descriptor this function owns.
    unsafe {
        assert_eq!(
            libc::bind(socket, (&from as *const libc::sockaddr_in).cast(), len),
            0
        );
        assert_eq!(
            libc::connect(socket, (&to as *const libc::sockaddr_in).cast(), len),
            0
        );
        std::os::fd::FromRawFd::from_raw_fd(socket)
    }
}

fn rand_bit() -> bool {
    use std::sync::atomic::AtomicU64;
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed) % 2 == 0
}

/// A gzip stream of `n` zero bytes.
fn gzip_zeros(n: usize) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..n / zeros.len() {
        gz.write_all(&zeros).unwrap();
    }
    gz.finish().unwrap()
}
