//! SQLite's errors as [`IndexError`]s: the one place that reads SQLite's result codes.

use crate::IndexError;

impl From<rusqlite::Error> for IndexError {
    fn from(e: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode;
        let Some(code) = e.sqlite_error_code() else {
            // Not from SQLite itself: a value of an unexpected type, a statement's misuse.
            return IndexError::Internal {
                detail: "reading the SQLite index".into(),
                source: Some(Box::new(e)),
            };
        };
        let source = Box::new(e);
        match code {
            ErrorCode::DiskFull => IndexError::DiskFull { source },
            // Still locked after the connection's busy timeout.
            ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => IndexError::Busy { source },
            ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => IndexError::Damaged { source },
            ErrorCode::CannotOpen | ErrorCode::ReadOnly | ErrorCode::PermissionDenied => {
                IndexError::Unavailable {
                    reason: "cannot open or write the SQLite index file: check that its \
                             directory exists and that the server's user may write both"
                        .into(),
                    source: Some(source),
                }
            }
            _ => IndexError::Internal {
                detail: "SQLite index query".into(),
                source: Some(source),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::SqliteIndex;
    use crate::Index;
    use rusqlite::ffi;

    fn failure(code: std::os::raw::c_int) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(ffi::Error::new(code), None)
    }

    #[test]
    fn result_codes_map_to_what_failed() {
        let full = IndexError::from(failure(ffi::SQLITE_FULL));
        assert!(matches!(full, IndexError::DiskFull { .. }), "{full:?}");
        for code in [ffi::SQLITE_BUSY, ffi::SQLITE_LOCKED] {
            let e = IndexError::from(failure(code));
            assert!(matches!(e, IndexError::Busy { .. }), "{e:?}");
        }
        for code in [ffi::SQLITE_CORRUPT, ffi::SQLITE_NOTADB] {
            let e = IndexError::from(failure(code));
            assert!(matches!(e, IndexError::Damaged { .. }), "{e:?}");
        }
        for code in [ffi::SQLITE_CANTOPEN, ffi::SQLITE_READONLY, ffi::SQLITE_PERM] {
            let e = IndexError::from(failure(code));
            assert!(matches!(e, IndexError::Unavailable { .. }), "{e:?}");
        }
        let other = IndexError::from(failure(ffi::SQLITE_CONSTRAINT));
        assert!(matches!(other, IndexError::Internal { .. }), "{other:?}");
        let typed = IndexError::from(rusqlite::Error::InvalidColumnType(
            0,
            "size".into(),
            rusqlite::types::Type::Text,
        ));
        assert!(matches!(typed, IndexError::Internal { .. }), "{typed:?}");
    }

    /// A real full disk: the database may not grow past `max_page_count`, which SQLite
    /// reports exactly as it reports a full disk (SQLITE_FULL).
    #[test]
    fn a_full_database_is_disk_full() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.sqlite");
        let index = SqliteIndex::open(&path, false).unwrap();
        let pages: i64 = {
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.query_row("PRAGMA page_count", [], |r| r.get(0))
                .unwrap()
        };
        index
            .writer
            .lock()
            .unwrap()
            .pragma_update(None, "max_page_count", pages)
            .unwrap();
        let mut result = Ok(true);
        for n in 0..64u8 {
            result = index.register_xorb(&big_xorb(n));
            if result.is_err() {
                break;
            }
        }
        let err = result.expect_err("the database cannot grow");
        assert!(matches!(err, IndexError::DiskFull { .. }), "{err:?}");
        assert!(err.to_string().contains("full"), "{err}");
    }

    /// Another connection holding the write lock past the busy timeout: Busy.
    #[test]
    fn a_held_write_lock_is_busy() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.sqlite");
        let index = SqliteIndex::open(&path, false).unwrap();
        index
            .writer
            .lock()
            .unwrap()
            .busy_timeout(std::time::Duration::from_millis(50))
            .unwrap();
        let holder = rusqlite::Connection::open(&path).unwrap();
        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        let err = index.register_xorb(&big_xorb(1)).expect_err("locked");
        assert!(matches!(err, IndexError::Busy { .. }), "{err:?}");
    }

    /// A path whose directory does not exist cannot be opened: Unavailable, with the cause.
    #[test]
    fn a_missing_directory_is_unavailable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("index.sqlite");
        let err = match SqliteIndex::open(&path, false) {
            Ok(_) => panic!("opened {}", path.display()),
            Err(e) => e,
        };
        assert!(matches!(err, IndexError::Unavailable { .. }), "{err:?}");
        assert!(
            err.with_causes().contains("unable to open"),
            "{}",
            err.with_causes()
        );
    }

    fn big_xorb(n: u8) -> crate::XorbMeta {
        use git_xet_core::xorb::XorbFooter;
        use git_xet_core::MerkleHash;
        let chunks = 512u32;
        let hash = |i: u32| {
            let mut b = [n; 32];
            b[..4].copy_from_slice(&i.to_le_bytes());
            MerkleHash::from_bytes(b)
        };
        crate::XorbMeta {
            footer: XorbFooter {
                hash: hash(u32::MAX),
                chunk_hashes: (0..chunks).map(hash).collect(),
                chunk_ends: (1..=chunks).map(|i| i * 100).collect(),
                unpacked_ends: (1..=chunks).map(|i| i * 100).collect(),
            },
            stored_len: u64::from(chunks) * 100 + 64,
        }
    }
}
