//! File records per dedup scope: under `--dedup-scope repo` a repository
//! that registers a whole file another repository registered first is served its own
//! record (its own xorbs), and nothing it is told depends on whether the other repository
//! has the file. On the SQLite index and on PostgreSQL; gc and `check` keep both records.

use git_xet_core::MerkleHash;

use crate::common::*;
use crate::lfs::{basic_download, basic_upload};
use crate::support::{postgres, TestServer};

/// The same file, packed two ways: as `org/a`'s client packs it and as `org/b`'s does
/// (same chunks, so the same file hash; other xorbs).
fn packings(seed: u64) -> (Upload, Upload) {
    let data = crate::support::random_bytes(700_000, seed);
    let a = Upload::new(data.clone(), 4);
    let b = Upload::new(data, 32);
    assert_eq!(a.file_hash, b.file_hash);
    assert!(a
        .xorbs
        .iter()
        .all(|x| b.xorbs.iter().all(|y| x.hash != y.hash)));
    (a, b)
}

/// A repo-scoped server on a fresh index: SQLite, or a new PostgreSQL database (`None`
/// when PostgreSQL is not installed: the test skips).
fn start(pg: bool) -> Option<(TestServer, Option<postgres::PgDatabase>)> {
    let db = if pg {
        Some(postgres::database()?)
    } else {
        None
    };
    let mut args = vec!["--dedup-scope", "repo", "--no-fsync"];
    if let Some(db) = &db {
        args.extend(["--index", &db.url]);
    }
    Some((TestServer::start_with(&args), db))
}

/// The xorbs a reconstruction points to, term by term, with their chunk ranges.
fn pointed_to(cas: &Cas, file: &MerkleHash) -> Vec<(MerkleHash, u32, u32)> {
    cas.reconstruction(file, None)
        .terms
        .iter()
        .map(|t| (t.hash, t.range.start, t.range.end))
        .collect()
}

/// What `org/b` (shard upload) and `org/c` (basic upload) are told about the file, with or
/// without `org/a` having registered it first. Asserts that neither is pointed to `org/a`'s
/// xorbs.
fn what_others_see(pg: bool, a_first: bool, seed: u64) -> Option<Vec<String>> {
    let (server, _db) = start(pg)?;
    let (a_up, b_up) = packings(seed);
    let file = a_up.file_hash;
    let a_xorbs: Vec<MerkleHash> = a_up.xorbs.iter().map(|x| x.hash).collect();
    if a_first {
        let a = Cas::new(&server, "org/a", "write");
        a.upload(&a_up);
        assert_eq!(a.download(&file, None), a_up.data);
    }
    let mut seen = Vec::new();

    // hf-xet style: its own xorbs, then a shard naming the file's hash.
    let b = Cas::new(&server, "org/b", "write");
    for x in &b_up.xorbs {
        seen.push(format!("xorb inserted: {}", b.post_xorb(x)));
    }
    let (status, answer) = json(b.post_shard_raw(b_up.shard.to_upload_bytes()));
    seen.push(format!("shard: {status} {answer}"));
    let terms = pointed_to(&b, &file);
    let b_xorbs: Vec<MerkleHash> = b_up.xorbs.iter().map(|x| x.hash).collect();
    assert!(
        terms.iter().all(|t| b_xorbs.contains(&t.0)),
        "a_first={a_first}: org/b is pointed to xorbs it did not upload: {terms:?}"
    );
    seen.push(format!("org/b terms: {terms:?}"));
    assert_eq!(b.download(&file, None), b_up.data);

    // A basic upload, which the server converts itself.
    let token = server.token("org/c", "write");
    let answer = basic_upload(&server, "org/c", &token, &b_up.data);
    seen.push(format!("basic upload: {}", answer["objects"][0]["error"]));
    let c = Cas::new(&server, "org/c", "read");
    let terms = pointed_to(&c, &file);
    // The conversion may build org/b's xorb again (the same chunks in one xorb): org/c then
    // holds it too. Never org/a's.
    assert!(
        terms.iter().all(|t| !a_xorbs.contains(&t.0)),
        "a_first={a_first}: org/c is pointed to org/a's xorbs: {terms:?}"
    );
    seen.push(format!("org/c terms: {terms:?}"));
    assert_eq!(
        basic_download(&server, "org/c", &token, &b_up.data),
        b_up.data
    );
    assert_eq!(c.download(&file, None), b_up.data);
    Some(seen)
}

fn own_records_and_no_oracle(pg: bool) {
    let Some(with_a) = what_others_see(pg, true, 301) else {
        return;
    };
    let without_a = what_others_see(pg, false, 301).unwrap();
    assert_eq!(
        with_a, without_a,
        "the answers tell whether org/a has the file"
    );
}

#[test]
fn scope_files_each_repository_is_served_its_own_record() {
    own_records_and_no_oracle(false);
}

#[test]
fn scope_files_each_repository_is_served_its_own_record_on_postgres() {
    own_records_and_no_oracle(true);
}

/// A repository deleted and collected takes its record and its xorbs, never the other
/// repository's: whichever registered the file first, the survivor's file still rebuilds.
fn gc_keeps_the_survivors_record(pg: bool) {
    for deleted_first in [false, true] {
        let Some((server, _db)) = start(pg) else {
            return;
        };
        let (a_up, b_up) = packings(302);
        let a = Cas::new(&server, "org/a", "write");
        let b = Cas::new(&server, "org/b", "write");
        if deleted_first {
            b.upload(&b_up);
            a.upload(&a_up);
        } else {
            a.upload(&a_up);
            b.upload(&b_up);
        }
        let what = format!("org/b registered first: {deleted_first}");
        let admin_ok = |args: &[&str]| {
            let out = server.admin(args).output().unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(out.status.success(), "{what}: {args:?}: {text}");
            text
        };
        let out = admin_ok(&["check", "--read-data"]);
        assert!(out.contains("no problems found"), "{what}: {out}");
        admin_ok(&["repo", "delete", "org/b", "--yes"]);
        admin_ok(&["gc", "--grace", "0"]);
        let out = admin_ok(&["check", "--read-data"]);
        assert!(out.contains("no problems found"), "{what}: {out}");
        assert_eq!(a.download(&a_up.file_hash, None), a_up.data, "{what}");
        let terms = pointed_to(&a, &a_up.file_hash);
        assert!(
            terms
                .iter()
                .all(|t| a_up.xorbs.iter().any(|x| x.hash == t.0)),
            "{what}: {terms:?}"
        );
        // org/b's xorbs went with it when it registered second.
        if !deleted_first {
            let stored = server.stored_objects("xorbs");
            let kept = b_up
                .xorbs
                .iter()
                .filter(|x| stored.iter().any(|(n, _)| n.contains(&x.hash.to_hex())))
                .count();
            assert_eq!(kept, 0, "{what}");
        }
    }
}

#[test]
fn scope_files_gc_keeps_the_survivors_record() {
    gc_keeps_the_survivors_record(false);
}

#[test]
fn scope_files_gc_keeps_the_survivors_record_on_postgres() {
    gc_keeps_the_survivors_record(true);
}
