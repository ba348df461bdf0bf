//! The `Index` contract, written once against `&dyn Index` and run on both backends: the
//! embedded SQLite index and PostgreSQL (a real server, git-xet-testkit's `postgres`). Two
//! handles on one database stand for two server processes.

use std::sync::Arc;

use git_xet_core::shard::FileTerm;
use git_xet_core::xorb::XorbFooter;
use git_xet_core::MerkleHash;
use git_xet_index::RepoName;
use git_xet_index::{
    DedupDomain, FileRecord, Index, PgIndex, ShardRegistration, SqliteIndex, XorbMeta,
};

use git_xet_testkit::postgres;

#[path = "contract/topics.rs"]
mod topics;

#[path = "contract/scope.rs"]
mod scope;

#[path = "contract/errors.rs"]
mod errors;

/// Opens another handle on the same index (another "process").
type Opener = Box<dyn Fn() -> Arc<dyn Index>>;
/// A named case of the contract.
type Case = (&'static str, fn(&Opener));

fn sqlite() -> (tempfile::TempDir, Opener) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.sqlite");
    (
        dir,
        Box::new(move || Arc::new(SqliteIndex::open(&path, false).unwrap()) as Arc<dyn Index>),
    )
}

fn pg() -> Option<(postgres::PgDatabase, Opener)> {
    let db = postgres::database()?;
    let url = db.url.clone();
    Some((
        db,
        Box::new(move || Arc::new(PgIndex::open(&url).unwrap()) as Arc<dyn Index>),
    ))
}

fn hash(tag: u8, n: u32) -> MerkleHash {
    let mut b = [tag; 32];
    b[8..12].copy_from_slice(&n.to_le_bytes());
    b[0..4].copy_from_slice(&n.to_le_bytes());
    b[4] = tag;
    MerkleHash::from_bytes(b)
}

fn xorb(tag: u8, chunks: &[MerkleHash]) -> XorbMeta {
    let n = chunks.len() as u32;
    XorbMeta {
        footer: XorbFooter {
            hash: hash(tag, 0xffff),
            chunk_hashes: chunks.to_vec(),
            chunk_ends: (1..=n).map(|i| i * 110).collect(),
            unpacked_ends: (1..=n).map(|i| i * 100).collect(),
        },
        stored_len: u64::from(n) * 110 + 64,
    }
}

fn file(tag: u8, x: &XorbMeta) -> FileRecord {
    FileRecord {
        file_hash: hash(tag, 0xeeee),
        size: 200,
        sha256: [tag; 32],
        terms: vec![FileTerm {
            xorb_hash: x.hash(),
            cas_flags: 0,
            chunk_start: 0,
            chunk_end: 2,
            unpacked_bytes: 200,
        }],
    }
}

fn shard(tag: u8, repo: &str, files: &[FileRecord]) -> ShardRegistration {
    ShardRegistration {
        shard_hash: hash(tag, 0xdddd),
        shard_len: 1000,
        repo: RepoName::parse(repo).unwrap(),
        domain: DedupDomain::Server,
        files: files.to_vec(),
        first_chunks: files
            .iter()
            .map(|f| {
                let first = hash(f.sha256[0], 1);
                (first, f.file_hash)
            })
            .collect(),
    }
}

fn xorbs_and_chunks(open: &Opener) {
    let index = open();
    let c: Vec<MerkleHash> = (1..=3).map(|i| hash(1, i)).collect();
    let a = xorb(10, &c[..2]);
    let b = xorb(11, &c[1..]);
    assert!(index.register_xorb(&a).unwrap(), "new xorb");
    assert!(!index.register_xorb(&a).unwrap(), "known xorb");
    assert!(index.register_xorb(&b).unwrap());
    // A fresh handle (no cache) reads the same layout.
    let other = open();
    assert_eq!(*other.xorb(&a.hash()).unwrap().unwrap(), a);
    assert!(other.xorb(&hash(99, 1)).unwrap().is_none());
    // The first xorb to store a chunk stays its location.
    assert_eq!(
        other.chunk_location(&c[0], &DedupDomain::Server).unwrap(),
        Some((a.hash(), 0))
    );
    assert_eq!(
        other.chunk_location(&c[1], &DedupDomain::Server).unwrap(),
        Some((a.hash(), 1))
    );
    assert_eq!(
        other.chunk_location(&c[2], &DedupDomain::Server).unwrap(),
        Some((b.hash(), 1))
    );
    // Same 8-byte key, different hash: not a match.
    let mut lookalike = *c[0].as_bytes();
    lookalike[31] ^= 1;
    assert_eq!(
        other
            .chunk_location(&MerkleHash::from_bytes(lookalike), &DedupDomain::Server)
            .unwrap(),
        None
    );
    let stats = other.stats().unwrap();
    assert_eq!(stats.xorbs, 2);
    assert_eq!(stats.xorb_bytes, a.stored_len + b.stored_len);

    // Another layout of a known xorb (records ending elsewhere), as read from the store:
    // it replaces the recorded one, for this handle and a fresh one; not counted as new.
    let mut relaid = a.clone();
    relaid.footer.chunk_ends = vec![90, 200];
    relaid.stored_len = a.stored_len + 50;
    assert!(!other.register_xorb(&relaid).unwrap());
    assert_eq!(*other.xorb(&a.hash()).unwrap().unwrap(), relaid);
    assert_eq!(*open().xorb(&a.hash()).unwrap().unwrap(), relaid);
    assert_eq!(
        other.chunk_location(&c[1], &DedupDomain::Server).unwrap(),
        Some((a.hash(), 1))
    );
    assert!(!other.register_xorb(&a).unwrap());
    assert_eq!(*open().xorb(&a.hash()).unwrap().unwrap(), a);
}

fn shards_files_and_repos(open: &Opener) {
    let index = open();
    let x = xorb(20, &[hash(2, 1), hash(2, 2)]);
    index.register_xorb(&x).unwrap();
    let (f1, f2) = (file(21, &x), file(22, &x));
    let s = shard(23, "team/models", &[f1.clone(), f2.clone()]);
    let out = index.register_shard(&s).unwrap();
    assert!(out.new_shard && out.changed());
    assert_eq!((out.new_files, out.new_repo_files), (2, 2));
    let again = index.register_shard(&s).unwrap();
    assert!(!again.changed(), "{again:?}");
    // The same files through another repository's shard: visible there too, not new files.
    let other_repo = shard(24, "team/other", std::slice::from_ref(&f1));
    let out = open().register_shard(&other_repo).unwrap();
    assert_eq!(
        (out.new_shard, out.new_files, out.new_repo_files),
        (true, 0, 1)
    );

    let reader = open();
    assert_eq!(
        reader
            .file(&f1.file_hash, &DedupDomain::Server)
            .unwrap()
            .unwrap(),
        f1
    );
    assert!(reader
        .file(&hash(29, 0), &DedupDomain::Server)
        .unwrap()
        .is_none());
    let models = RepoName::parse("team/models").unwrap();
    let other = RepoName::parse("team/other").unwrap();
    assert!(reader.repo_has_file(&models, &f2.file_hash).unwrap());
    assert!(!reader.repo_has_file(&other, &f2.file_hash).unwrap());
    assert_eq!(
        reader.repo_file_by_sha256(&models, &f2.sha256).unwrap(),
        Some(f2.clone())
    );
    assert_eq!(
        reader.repo_file_by_sha256(&other, &f2.sha256).unwrap(),
        None,
        "no lookup by sha256 across repositories"
    );
    assert_eq!(
        reader
            .files_starting_with(&hash(21, 1), 10, &DedupDomain::Server)
            .unwrap(),
        vec![f1.file_hash]
    );
    assert!(reader
        .files_starting_with(&hash(28, 1), 10, &DedupDomain::Server)
        .unwrap()
        .is_empty());
    assert_eq!(reader.stats().unwrap().files, 2);
}

/// Eight writers on two handles register the same xorb and shard at once: none fails,
/// exactly one of them created each row.
fn concurrent_registrations(open: &Opener) {
    let handles = [open(), open()];
    let before = handles[0].stats().unwrap().files;
    let x = xorb(30, &[hash(3, 1), hash(3, 2)]);
    let files: Vec<FileRecord> = (31..35).map(|t| file(t, &x)).collect();
    let s = shard(36, "team/race", &files);
    let results: Vec<(bool, u64, bool)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..8)
            .map(|i| {
                let index = handles[i % 2].clone();
                let (x, s) = (&x, &s);
                scope.spawn(move || {
                    let new_xorb = index.register_xorb(x).unwrap();
                    let out = index.register_shard(s).unwrap();
                    (new_xorb, out.new_files, out.new_shard)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    assert_eq!(results.iter().filter(|r| r.0).count(), 1, "{results:?}");
    assert_eq!(results.iter().filter(|r| r.2).count(), 1, "{results:?}");
    assert_eq!(results.iter().map(|r| r.1).sum::<u64>(), 4, "{results:?}");
    assert_eq!(open().stats().unwrap().files, before + 4);
}

/// Shards with overlapping files in opposite orders, registered at once, many times: the
/// backends must not deadlock or fail.
fn overlapping_shards(open: &Opener) {
    let handles = [open(), open()];
    let before = handles[0].stats().unwrap().files;
    let x = xorb(40, &[hash(4, 1), hash(4, 2)]);
    handles[0].register_xorb(&x).unwrap();
    let files: Vec<FileRecord> = (0..40).map(|t| file(100 + t, &x)).collect();
    std::thread::scope(|scope| {
        for i in 0..6u8 {
            let index = handles[usize::from(i) % 2].clone();
            let mut mine = files.clone();
            if i % 2 == 1 {
                mine.reverse();
            }
            scope.spawn(move || {
                for round in 0..5u8 {
                    let s = shard(200 + i * 8 + round, "team/overlap", &mine);
                    index.register_shard(&s).unwrap();
                }
            });
        }
    });
    assert_eq!(open().stats().unwrap().files, before + 40);
}

/// Storage use per repository: files, logical bytes, and the distinct xorbs behind them.
fn usage(open: &Opener) {
    let index = open();
    let x = xorb(50, &[hash(5, 1), hash(5, 2)]);
    index.register_xorb(&x).unwrap();
    let (f1, f2) = (file(51, &x), file(52, &x));
    index
        .register_shard(&shard(53, "usage/a", &[f1.clone(), f2]))
        .unwrap();
    index
        .register_shard(&shard(54, "usage/b", std::slice::from_ref(&f1)))
        .unwrap();
    let a = open()
        .repo_usage(&RepoName::parse("usage/a").unwrap())
        .unwrap();
    assert_eq!(
        (a.files, a.logical_bytes, a.xorbs, a.stored_bytes),
        (2, 400, 1, x.stored_len)
    );
    let b = open()
        .repo_usage(&RepoName::parse("usage/b").unwrap())
        .unwrap();
    assert_eq!((b.files, b.logical_bytes, b.xorbs), (1, 200, 1));
    let none = open()
        .repo_usage(&RepoName::parse("usage/none").unwrap())
        .unwrap();
    assert_eq!(none.files + none.xorbs, 0);
    let total = open().total_usage().unwrap();
    assert_eq!(total.files, open().stats().unwrap().files);
    assert_eq!(total.stored_bytes, open().stats().unwrap().xorb_bytes);
}

/// Visibility records (`create_repo(private=)`): one handle's write is the other's read, a
/// dataset of the same name is another repository, forgetting or deleting drops the record.
fn repository_visibility(open: &Opener) {
    let (a, b) = (open(), open());
    let repo = RepoName::parse("contract/private").unwrap();
    let data = RepoName::parse("datasets/contract/private").unwrap();
    assert!(!a.repo_private(&repo).unwrap());
    a.set_repo_private(&repo, true).unwrap();
    assert!(b.repo_private(&repo).unwrap());
    assert!(!b.repo_private(&data).unwrap());
    b.set_repo_private(&repo, false).unwrap();
    assert!(!a.repo_private(&repo).unwrap());
    a.set_repo_private(&repo, true).unwrap();
    b.forget_repo(&repo).unwrap();
    assert!(!a.repo_private(&repo).unwrap());
    // `repo delete` drops it too: a repository created again under the name starts public.
    a.set_repo_private(&repo, true).unwrap();
    b.delete_repo_files(&repo).unwrap();
    assert!(!a.repo_private(&repo).unwrap());
}

/// Runs every case of the contract, each on its own keys of the shared index, and then
/// fails with all the cases that failed (not only the first).
fn contract(open: &Opener) {
    let mut cases: Vec<Case> = vec![
        ("xorbs_and_chunks", xorbs_and_chunks),
        ("shards_files_and_repos", shards_files_and_repos),
        ("concurrent_registrations", concurrent_registrations),
        ("overlapping_shards", overlapping_shards),
        ("usage", usage),
    ];
    cases.extend(topics::CASES);
    cases.push((
        "holders_and_scoped_lookups",
        scope::holders_and_scoped_lookups,
    ));
    cases.push(("file_records_per_domain", scope::file_records_per_domain));
    cases.push(("repository_visibility", repository_visibility));
    let failures = run_all(open, &cases);
    assert!(
        failures.is_empty(),
        "{} of {} index contract cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// Runs each case, catching its panic; the failures as `name: message`.
fn run_all(open: &Opener, cases: &[Case]) -> Vec<String> {
    let mut failures = Vec::new();
    for (name, case) in cases {
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| case(open)));
        if let Err(panic) = run {
            let message = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)");
            failures.push(format!("{name}: {message}"));
        }
    }
    failures
}

#[test]
fn sqlite_index_contract() {
    let (_dir, open) = sqlite();
    contract(&open);
}

#[test]
fn postgres_index_contract() {
    let Some((_db, open)) = pg() else { return };
    contract(&open);
}

/// Undoing schema version 2 gives the version-1 tables (one location per chunk key, no
/// holders), as a server before dedup scopes left them.
#[test]
fn sqlite_index_written_before_scopes_is_upgraded() {
    let (dir, open) = sqlite();
    let path = dir.path().join("index.sqlite");
    scope::upgrade_from_unscoped(&open, &|| {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "DROP TABLE xorb_repos;
             DROP INDEX repo_files_by_file;
             CREATE TABLE chunks_v1 (key INTEGER PRIMARY KEY, xorb_id INTEGER NOT NULL, chunk_index INTEGER NOT NULL);
             INSERT OR IGNORE INTO chunks_v1 SELECT key, xorb_id, chunk_index FROM chunks ORDER BY xorb_id;
             DROP TABLE chunks;
             ALTER TABLE chunks_v1 RENAME TO chunks;
             ALTER TABLE repo_files DROP COLUMN terms;
             UPDATE schema_info SET version = 1;",
        )
        .unwrap();
    });
}

#[test]
fn postgres_index_written_before_scopes_is_upgraded() {
    let Some((db, open)) = pg() else { return };
    scope::upgrade_from_unscoped(&open, &|| {
        db.sql(
            "DROP TABLE xorb_repos;
             DROP INDEX repo_files_by_file;
             DELETE FROM chunks c WHERE EXISTS (SELECT 1 FROM chunks d WHERE d.key = c.key AND d.xorb_id < c.xorb_id);
             ALTER TABLE chunks DROP CONSTRAINT chunks_pkey;
             ALTER TABLE chunks ADD PRIMARY KEY (key);
             ALTER TABLE repo_files DROP COLUMN terms;
             DROP TABLE repositories;
             DELETE FROM schema_migrations WHERE version >= 6;",
        );
    });
}

/// Processes starting at once against an empty database all migrate it without error,
/// and agree on one signing secret.
#[test]
fn postgres_concurrent_start_and_one_secret() {
    let Some(db) = postgres::database() else {
        return;
    };
    let secrets: Vec<[u8; 32]> = std::thread::scope(|scope| {
        let starts: Vec<_> = (0..6)
            .map(|_| {
                scope.spawn(|| {
                    let index = PgIndex::open(&db.url).unwrap();
                    index.shared_secret().unwrap()
                })
            })
            .collect();
        starts.into_iter().map(|s| s.join().unwrap()).collect()
    });
    assert!(secrets.windows(2).all(|w| w[0] == w[1]));
    assert_eq!(db.sql("SELECT COUNT(*) FROM server_secret"), "1");
    assert_eq!(
        db.sql("SELECT string_agg(version::text, ',') FROM schema_migrations"),
        "1,2,3,4,5,6,7,8"
    );
}

/// An unreachable database is a typed error that says which one (password hidden).
#[test]
fn postgres_unreachable_is_a_clear_error() {
    let closed = git_xet_testkit::ports::ClosedPort::bind();
    let port = closed.port();
    let url = format!("postgres://xet:hunter2@127.0.0.1:{port}/xet");
    let err = match PgIndex::open(&url) {
        Ok(_) => panic!("nothing listens on {port}"),
        Err(e) => e,
    };
    assert!(
        matches!(err, git_xet_index::IndexError::Unavailable { .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(!text.contains("hunter2"), "{text}");
}
