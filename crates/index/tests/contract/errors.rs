//! Each backend's failures as the same neutral `IndexError` variants, produced by the real
//! engines (the server's answer for each variant is tested in its error module).

use git_xet_index::{Index, IndexError, PgIndex, SqliteIndex};

use git_xet_testkit::postgres;

/// A PostgreSQL that stops under a running index: the next query is `Unavailable` (a 503
/// from the server), not an internal error, and says what to check.
#[test]
fn postgres_stopped_under_the_index_is_unavailable() {
    let Some(cluster) = postgres::own_cluster() else {
        return;
    };
    cluster.run_client("createdb", &["xet"]);
    let index = PgIndex::open(&cluster.url("xet")).unwrap();
    assert_eq!(index.stats().unwrap().xorbs, 0);
    drop(cluster);
    let err = index.stats().expect_err("PostgreSQL is stopped");
    assert!(matches!(err, IndexError::Unavailable { .. }), "{err:?}");
    let text = err.with_causes();
    assert!(text.contains("PostgreSQL"), "{text}");
}

/// A test that fails while it holds its own cluster leaves no PostgreSQL behind: the guard
/// stops it while the panic unwinds.
#[test]
fn a_failing_test_leaves_no_postgres_running() {
    let mut pid = None;
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let Some(cluster) = postgres::own_cluster() else {
            return;
        };
        pid = cluster.pid();
        assert!(pid.is_some_and(postgres::process_runs), "{pid:?} runs");
        panic!("a failing test");
    }));
    let Some(pid) = pid else {
        return; // skipped: PostgreSQL is not installed
    };
    assert!(outcome.is_err(), "the test failed");
    assert!(
        !postgres::process_runs(pid),
        "postmaster {pid} survived the failed test"
    );
}

/// A schema a newer server wrote: `SchemaTooNew` on both engines, naming both versions.
#[test]
fn a_newer_schema_is_refused_on_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.sqlite");
    drop(SqliteIndex::open(&path, false).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute("UPDATE schema_info SET version = 99", [])
        .unwrap();
    drop(conn);
    match SqliteIndex::open(&path, false) {
        Err(IndexError::SchemaTooNew { found: 99, .. }) => {}
        Err(e) => panic!("{e:?}"),
        Ok(_) => panic!("opened a newer schema"),
    }

    let Some(db) = postgres::database() else {
        return;
    };
    drop(PgIndex::open(&db.url).unwrap());
    db.sql("INSERT INTO schema_migrations (version, applied_at) VALUES (99, 0)");
    let err = match PgIndex::open(&db.url) {
        Err(e) => e,
        Ok(_) => panic!("opened a newer schema"),
    };
    assert!(
        matches!(err, IndexError::SchemaTooNew { found: 99, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("upgrade git-xet"), "{err}");
}

/// A SQLite index whose file is not a database: `Damaged`, with SQLite's words in the chain.
#[test]
fn a_sqlite_file_that_is_no_database_is_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.sqlite");
    std::fs::write(&path, vec![0x5a; 8192]).unwrap();
    let err = match SqliteIndex::open(&path, false) {
        Err(e) => e,
        Ok(_) => panic!("opened garbage"),
    };
    assert!(matches!(err, IndexError::Damaged { .. }), "{err:?}");
    assert!(err.with_causes().contains("not a database"), "{err:?}");
}
