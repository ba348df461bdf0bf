//! One xorb, two valid byte layouts (chunks compressed, or stored raw): the xorb hash is the
//! same, the record offsets are not. Whatever order uploads in either layout reach the store
//! and the index (concurrent, or one interrupted between the two and retried in the other),
//! the index must describe the stored bytes: every file using the xorb downloads bit-exact.
//! The server's test hook (`GIT_XET_XORB_TEST_PAUSE`, crates/server/src/cas/stored_xorb.rs) holds
//! each upload before its store write (`staged.N`) and before its index write (`stored.N`).

use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use git_xet_core::compression::CompressionScheme;
use git_xet_core::xorb::ChunkHeader;

use crate::common::*;
use crate::support::garage::{self, Garage};
use crate::support::postgres;
use crate::support::TestServer;

const REPO: &str = "org/layouts";

/// Text that LZ4 compresses, different per seed.
fn text(len: usize, seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 64);
    let mut i = seed;
    while out.len() < len {
        out.extend_from_slice(format!("row {i}: value {}\n", i * 7919 % 10007).as_bytes());
        i += 1;
    }
    out.truncate(len);
    out
}

/// A file in one xorb, and that xorb's chunks stored raw (footer-less, as hf-xet sends).
fn two_layouts(seed: u64) -> (Upload, Vec<u8>) {
    let up = Upload::new(text(1_500_000, seed), 10_000);
    assert_eq!(up.xorbs.len(), 1);
    let mut raw = Vec::new();
    for chunk in chunks_of(&up.data) {
        let n = chunk.data.len();
        raw.extend_from_slice(&ChunkHeader::new(CompressionScheme::None, n, n).to_bytes());
        raw.extend_from_slice(&chunk.data);
    }
    assert!(
        raw.len() > up.xorbs[0].bytes.len() + 100_000,
        "the chunks compress"
    );
    (up, raw)
}

fn post(base: &str, token: &str, hash: String, body: Vec<u8>) -> JoinHandle<u16> {
    let (base, token) = (base.to_string(), token.to_string());
    std::thread::spawn(move || {
        client()
            .post(format!("{base}/v1/xorbs/default/{hash}"))
            .bearer_auth(token)
            .body(body)
            .send()
            .map(|r| r.status().as_u16())
            .unwrap_or(0)
    })
}

fn reached(dir: &Path, step: &str) {
    let file = dir.join(format!("{step}.reached"));
    assert!(wait_for(|| file.exists()), "{step} not reached");
}

fn go(dir: &Path, step: &str) {
    std::fs::write(dir.join(format!("{step}.go")), b"").unwrap();
}

fn server(garage: Option<(&Garage, &str)>, pause: &Path) -> TestServer {
    let env = [("GIT_XET_XORB_TEST_PAUSE", pause.display().to_string())];
    TestServer::start_with_env(garage, &[], &env)
}

/// The file downloads bit-exact, and `check --read-data` finds nothing wrong.
fn assert_served(server: &TestServer, cas: &Cas, up: &Upload) {
    cas.post_shard(&up.shard);
    let got = cas.download(&up.file_hash, None);
    assert!(got == up.data, "the file does not download bit-exact");
    let out = server.admin(&["check", "--read-data"]).output().unwrap();
    assert!(
        out.status.success(),
        "check: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Two uploads of one xorb (`a` compressed = upload n, `b` raw = upload n+1) pass the
/// existence check together, write the store in that order, then write the index with
/// upload `first` going first.
fn race(server: &TestServer, pause: &Path, seed: u64, n: u32, first: u32) {
    let cas = Cas::new(server, REPO, "write");
    race_between(
        (server, &cas, pause, n),
        (server, &cas, pause, n + 1),
        seed,
        first == n,
    );
}

/// An upload of one xorb's compressed layout to server `a` (its upload number `na`) and of
/// its raw layout to `b` (`nb`): both pass the existence check, write the store a then b,
/// then write the index, a first when `a_first`. Then the file must be served by both.
fn race_between(
    (sa, ca, pa, na): (&TestServer, &Cas, &Path, u32),
    (sb, cb, pb, nb): (&TestServer, &Cas, &Path, u32),
    seed: u64,
    a_first: bool,
) {
    let (up, raw) = two_layouts(seed);
    let hash = up.xorbs[0].hash.to_hex();
    let a = post(&sa.url, &ca.token, hash.clone(), up.xorbs[0].bytes.clone());
    reached(pa, &format!("staged.{na}"));
    let b = post(&sb.url, &cb.token, hash, raw);
    reached(pb, &format!("staged.{nb}"));
    go(pa, &format!("staged.{na}"));
    reached(pa, &format!("stored.{na}"));
    go(pb, &format!("staged.{nb}"));
    reached(pb, &format!("stored.{nb}"));
    let a = (a, pa, format!("stored.{na}"));
    let b = (b, pb, format!("stored.{nb}"));
    let (first, second) = if a_first { (a, b) } else { (b, a) };
    for (upload, pause, step) in [first, second] {
        go(pause, &step);
        assert_eq!(upload.join().unwrap(), 200);
    }
    assert_served(sa, ca, &up);
    if !std::ptr::eq(sa, sb) {
        let got = cb.download(&up.file_hash, None);
        assert!(
            got == up.data,
            "the other server does not serve it bit-exact"
        );
    }
}

/// Upload `n` (compressed) stops after the store write: the server is killed. Then the raw
/// layout is uploaded to the restarted server, and the file must be served.
fn interrupted(server: &mut TestServer, pause: &Path, seed: u64, n: u32) {
    let cas = Cas::new(server, REPO, "write");
    let (up, raw) = two_layouts(seed);
    let hash = up.xorbs[0].hash.to_hex();
    let a = post(
        &server.url,
        &cas.token,
        hash.clone(),
        up.xorbs[0].bytes.clone(),
    );
    reached(pause, &format!("staged.{n}"));
    go(pause, &format!("staged.{n}"));
    reached(pause, &format!("stored.{n}"));
    server.kill();
    let _ = a.join();
    // Restarted without pauses (the hook needs its directory).
    std::fs::remove_dir_all(pause).unwrap();
    server.restart();
    let retry = cas.post_xorb_raw(&hash, raw);
    assert_eq!(retry.status(), 200);
    assert_served(server, &cas, &up);
}

fn pause_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let pause = dir.path().join("pause");
    std::fs::create_dir(&pause).unwrap();
    (dir, pause)
}

#[test]
fn racing_layouts_of_one_xorb_leave_the_index_describing_the_store() {
    let (_dir, pause) = pause_dir();
    let server = server(None, &pause);
    race(&server, &pause, 1, 1, 2);
    race(&server, &pause, 2, 3, 3);
}

#[test]
fn a_retry_in_another_layout_after_an_interrupted_upload_is_served() {
    let (_dir, pause) = pause_dir();
    let mut server = server(None, &pause);
    interrupted(&mut server, &pause, 3, 1);
}

#[test]
fn racing_layouts_of_one_xorb_on_garage() {
    let Some(garage) = garage::shared() else {
        return;
    };
    let (_dir, pause) = pause_dir();
    let prefix = garage::unique_prefix("layouts");
    let server = server(Some((garage, &prefix)), &pause);
    race(&server, &pause, 4, 1, 1);
    race(&server, &pause, 5, 3, 4);
}

#[test]
fn a_retry_in_another_layout_after_an_interrupted_upload_on_garage() {
    let Some(garage) = garage::shared() else {
        return;
    };
    let (_dir, pause) = pause_dir();
    let prefix = garage::unique_prefix("layouts");
    let mut server = server(Some((garage, &prefix)), &pause);
    interrupted(&mut server, &pause, 6, 1);
}

/// Two server processes on one PostgreSQL index and one Garage bucket, each given one
/// layout: both orders of their index writes.
#[test]
fn racing_layouts_through_two_servers_on_postgres_and_garage() {
    let Some(garage) = garage::shared() else {
        return;
    };
    let Some(db) = postgres::database() else {
        return;
    };
    let prefix = garage::unique_prefix("layouts");
    let (_d1, p1) = pause_dir();
    let (_d2, p2) = pause_dir();
    let start = |pause: &Path| {
        let env = [("GIT_XET_XORB_TEST_PAUSE", pause.display().to_string())];
        TestServer::start_with_env(Some((garage, &prefix)), &["--index", &db.url], &env)
    };
    let (s1, s2) = (start(&p1), start(&p2));
    let token = s1.token(REPO, "write");
    let (c1, c2) = (Cas::with_token(&s1, &token), Cas::with_token(&s2, &token));
    race_between((&s1, &c1, &p1, 1), (&s2, &c2, &p2, 1), 7, true);
    race_between((&s1, &c1, &p1, 2), (&s2, &c2, &p2, 2), 8, false);
}

/// An index that describes another layout than the stored one (what an older server could
/// leave): `check --read-data` names it, and uploading the xorb again, in either layout,
/// repairs it.
#[test]
fn check_reports_a_layout_mismatch_and_a_re_upload_repairs_it() {
    use git_xet_core::xorb::XorbFooter;
    use git_xet_index::{Index, SqliteIndex, XorbMeta};

    let mut server = TestServer::start();
    let cas = Cas::new(&server, REPO, "write");
    let (up, raw) = two_layouts(9);
    cas.upload(&up);
    server.stop();
    // The stored layout with its first record ending one byte early: same size, other
    // offsets.
    let mut wrong = XorbMeta {
        footer: XorbFooter::parse(&up.xorbs[0].bytes).unwrap(),
        stored_len: up.xorbs[0].bytes.len() as u64,
    };
    wrong.footer.chunk_ends[0] -= 1;
    let index = SqliteIndex::open(&server.data.join("index.sqlite"), false).unwrap();
    assert!(!index.register_xorb(&wrong).unwrap());
    drop(index);
    let out = server.admin(&["check", "--read-data"]).output().unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("the index describes another layout than the stored one"),
        "{said}"
    );

    server.restart();
    assert!(!cas
        .post_xorb_raw(&up.xorbs[0].hash.to_hex(), raw)
        .status()
        .is_client_error());
    assert_served(&server, &cas, &up);
}
