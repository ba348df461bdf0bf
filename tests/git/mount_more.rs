//! `git xet mount` through real FUSE, continued: a second mount served by the caches with
//! no request; eviction under a small `--cache-size`; eight reader processes; a server
//! offering only `basic`; token and fetch-URL expiry during a mount; an ssh remote.

use std::path::Path;
use std::process::{Child, Stdio};

use crate::env::{ok, remote_url, GitEnv};
use crate::mount::{
    fixture, fixture_on, have_fuse, mount, mount_foreground, mounted, read_range, Fixture, Mounted,
    XORB_SERVED,
};
use crate::sshd::{self, Sshd};
use crate::support::{lfs_objects, TestServer};

/// Requests the server answered, its metrics scrapes left out.
pub(super) fn requests(server: &TestServer) -> u64 {
    server
        .metrics()
        .lines()
        .filter(|l| l.starts_with("git_xet_http_requests_total{") && !l.contains("metrics"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum()
}

pub(super) fn unmount(f: &Fixture, m: &Mounted) {
    ok(
        f.env
            .xet_output(&f.clone, &["unmount", m.0.to_str().unwrap()]),
        "git xet unmount",
    );
    assert!(!mounted(&m.0), "nothing left mounted");
}

/// Bytes in files under `dir`.
fn du(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .filter_map(|e| e.ok())
            .map(|e| match e.metadata() {
                Ok(m) if m.is_dir() => du(&e.path()),
                Ok(m) => m.len(),
                Err(_) => 0,
            })
            .sum()
    })
}

#[test]
fn a_second_mount_reads_from_the_caches_with_no_request() {
    if !have_fuse() {
        return;
    }
    let f = fixture();
    let view = mount(&f, "view", &[]);
    let model = view.0.join("weights/model.bin");
    assert!(std::fs::read(&model).unwrap() == f.v2);
    unmount(&f, &view);

    let (requests_before, served_before) = (requests(&f.server), f.server.metric(XORB_SERVED));
    let again = mount(&f, "again", &[]);
    let model = again.0.join("weights/model.bin");
    assert!(std::fs::read(&model).unwrap() == f.v2);
    assert!(read_range(&model, 3_000_001, 70_000).unwrap() == f.v2[3_000_001..3_070_001]);
    assert_eq!(
        requests(&f.server) - requests_before,
        0,
        "a second read through a new mount asks the server nothing"
    );
    assert_eq!(f.server.metric(XORB_SERVED), served_before);
    unmount(&f, &again);
    assert_eq!(lfs_objects(&f.clone), 0);
}

#[test]
fn a_small_cache_evicts_and_reads_stay_bit_exact() {
    if !have_fuse() {
        return;
    }
    let f = fixture();
    let cache = f.env.home.join(".cache/git-xet/chunks");
    for round in 0..2 {
        // 5 MiB: entries up to 2.5 MiB are kept; each read below is 1 MiB.
        let view = mount(&f, &format!("view{round}"), &["--cache-size", "5M"]);
        let model = view.0.join("weights/model.bin");
        // Backwards, 2 MiB apart (no read-ahead of ours): five entries, twice the bound.
        for block in (0..5u64).rev() {
            let offset = block * (2 << 20) + 1000;
            let len = (1usize << 20).min(f.v2.len() - offset as usize);
            assert!(
                read_range(&model, offset, len).unwrap()
                    == f.v2[offset as usize..offset as usize + len],
                "round {round}: block {block}"
            );
        }
        assert!(std::fs::read(&model).unwrap() == f.v2, "round {round}");
        unmount(&f, &view);
        let used = du(&cache);
        assert!(
            used > 0 && used <= 5 << 20,
            "round {round}: the cache holds {used} bytes"
        );
    }
    assert_eq!(lfs_objects(&f.clone), 0);
}

#[test]
fn eight_reader_processes_on_disjoint_ranges_fetch_each_block_once() {
    if !have_fuse() {
        return;
    }
    let f = fixture();
    let view = mount(&f, "view", &[]);
    let model = view.0.join("weights/model.bin");
    let before = f.server.metric(XORB_SERVED);
    let piece = f.v2.len() / 8;
    let readers: Vec<(usize, Child)> = (0..8)
        .map(|i| {
            let child = std::process::Command::new("python3")
                .args([
                    "-c",
                    "import os,sys; f=os.open(sys.argv[1],os.O_RDONLY); o=int(sys.argv[2]); \
                     n=int(sys.argv[3]); b=b''\n\
                     while len(b)<n: b+=os.pread(f,min(65536,n-len(b)),o+len(b))\n\
                     sys.stdout.buffer.write(b)",
                    model.to_str().unwrap(),
                    &(i * piece).to_string(),
                    &piece.to_string(),
                ])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            (i, child)
        })
        .collect();
    for (i, child) in readers {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        assert!(out.stdout == f.v2[i * piece..(i + 1) * piece], "reader {i}");
    }
    // Every byte once (random data: stored uncompressed), and at each edge between two
    // fetched ranges at most the one chunk that straddles it again (5 blocks: 4 edges, a
    // chunk is at most 128 KiB).
    let served = f.server.metric(XORB_SERVED) - before;
    let once = f.v2.len() as f64;
    assert!(
        served >= once && served <= once + (4 * (128 << 10) + 8192) as f64,
        "8 readers of a {once} byte file made the server send {served} bytes"
    );
    unmount(&f, &view);
}

#[test]
fn a_server_without_xet_is_read_whole_through_git_lfs() {
    if !have_fuse() {
        return;
    }
    let server = TestServer::start_with(&["--basic-only"]);
    let remote = remote_url(&server, "org/models", "write");
    let f = fixture_on(server, &remote, GitEnv::with_agent(&[]));
    let log = f.env.dir(".").join("mount.log");
    let stderr = Stdio::from(std::fs::File::create(&log).unwrap());
    let (guard, mut child) = mount_foreground(&f, "view", &[], stderr);
    let dir = guard.0.clone();
    let model = dir.join("weights/model.bin");
    assert!(read_range(&model, 6_000_000, 1000).unwrap() == f.v2[6_000_000..6_001_000]);
    assert!(std::fs::read(&model).unwrap() == f.v2);
    assert!(std::fs::read(dir.join("small.bin")).unwrap() == f.small);
    assert_eq!(f.server.metric(XORB_SERVED), 0.0, "no XET");
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    child.wait().unwrap();
    assert!(!mounted(&dir));
    let said = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        said.matches("read whole through git-lfs").count(),
        1,
        "said once: {said}"
    );
}

#[test]
fn tokens_and_fetch_urls_that_expire_during_a_mount_are_renewed() {
    if !have_fuse() {
        return;
    }
    let server = TestServer::start_with_clock(&["--token-ttl", "60", "--fetch-url-ttl", "30"]);
    let remote = remote_url(&server, "org/models", "write");
    let f = fixture_on(server, &remote, GitEnv::with_agent(&[]));
    let (guard, mut child) = mount_foreground(&f, "view", &["--timeout", "20"], Stdio::null());
    let model = guard.0.join("weights/model.bin");
    assert!(read_range(&model, 0, 1000).unwrap() == f.v2[..1000]);
    // Two hours on: the mount's token and every fetch URL it holds have expired.
    f.server.advance_clock(7200);
    let got = read_range(&model, 7_000_000, 100_000).unwrap();
    assert!(got == f.v2[7_000_000..7_100_000]);
    f.server.advance_clock(7200);
    assert!(std::fs::read(&model).unwrap() == f.v2);
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn an_ssh_remote_mounts_and_reads() {
    if !have_fuse() || !sshd::available() {
        return;
    }
    let server = TestServer::start();
    let sshd = Sshd::start(&server);
    let env = GitEnv::with_agent(&[]).with_env("GIT_SSH_COMMAND", &sshd.ssh_command());
    let f = fixture_on(server, &sshd.url("org/models"), env);
    let view = mount(&f, "view", &[]);
    let model = view.0.join("weights/model.bin");
    assert!(read_range(&model, 4_000_000, 300_000).unwrap() == f.v2[4_000_000..4_300_000]);
    assert!(std::fs::read(&model).unwrap() == f.v2);
    assert!(
        sshd.authenticate_calls()
            .iter()
            .any(|c| c == "org/models download"),
        "the mount asked over ssh: {:?}",
        sshd.authenticate_calls()
    );
    unmount(&f, &view);
    assert_eq!(lfs_objects(&f.clone), 0);
}
