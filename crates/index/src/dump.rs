//! A logical copy of the whole index, for `git xet server backup` and `restore`: every
//! table's rows as typed values, the same on SQLite and PostgreSQL, so a dump of one engine
//! loads into the other. Read in one read transaction (a consistent snapshot while servers
//! write), loaded in one write transaction (a restore is all or nothing).

use crate::IndexResult;

/// A column's type, as both engines store it (booleans are 0/1 integers in SQLite).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColType {
    Int,
    /// PostgreSQL `INTEGER` (32 bits); SQLite's are all 64.
    Int32,
    Text,
    Blob,
    Bool,
    /// A blob that may be NULL (`repo_files.terms`).
    NullableBlob,
}

/// One value of a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Int(i64),
    Text(String),
    Blob(Vec<u8>),
    Bool(bool),
    Null,
}

pub struct Table {
    pub name: &'static str,
    pub columns: &'static [(&'static str, ColType)],
}

impl Table {
    pub fn column_list(&self) -> String {
        let names: Vec<&str> = self.columns.iter().map(|c| c.0).collect();
        names.join(", ")
    }
}

use ColType::*;

/// Every table a deployment's state lives in (the schema bookkeeping and the PostgreSQL
/// secret aside: the backup keeps the secret on its own). Loaded in this order.
pub const TABLES: &[Table] = &[
    Table {
        name: "xorbs",
        columns: &[
            ("id", Int),
            ("hash", Blob),
            ("stored_len", Int),
            ("unpacked_len", Int),
            ("num_chunks", Int),
            ("chunk_hashes", Blob),
            ("chunk_ends", Blob),
            ("unpacked_ends", Blob),
            ("created_at", Int),
        ],
    },
    Table {
        name: "chunks",
        columns: &[("key", Int), ("xorb_id", Int), ("chunk_index", Int32)],
    },
    Table {
        name: "xorb_repos",
        columns: &[("xorb_id", Int), ("repo", Text), ("at", Int)],
    },
    Table {
        name: "condemned_xorbs",
        columns: &[("hash", Blob), ("condemned_at", Int)],
    },
    Table {
        name: "files",
        columns: &[
            ("hash", Blob),
            ("size", Int),
            ("sha256", Blob),
            ("terms", Blob),
            ("created_at", Int),
        ],
    },
    Table {
        name: "repo_files",
        columns: &[
            ("repo", Text),
            ("file_hash", Blob),
            ("sha256", Blob),
            ("created_at", Int),
            ("terms", NullableBlob),
        ],
    },
    Table {
        name: "first_chunks",
        columns: &[("chunk_hash", Blob), ("file_hash", Blob)],
    },
    Table {
        name: "shards",
        columns: &[
            ("hash", Blob),
            ("repo", Text),
            ("len", Int),
            ("created_at", Int),
        ],
    },
    Table {
        name: "verified_sha256",
        columns: &[("file_hash", Blob), ("sha256", Blob), ("verified_at", Int)],
    },
    Table {
        name: "repositories",
        columns: &[("name", Text), ("private", Bool)],
    },
    Table {
        name: "tokens",
        columns: &[
            ("id", Text),
            ("user_name", Text),
            ("repo", Text),
            ("scope", Text),
            ("created_at", Int),
            ("expires_at", Int),
            ("revoked", Bool),
        ],
    },
    Table {
        name: "locks",
        columns: &[
            ("repo", Text),
            ("id", Text),
            ("path", Text),
            ("owner", Text),
            ("locked_at", Int),
        ],
    },
];

/// Rows of each table of [`TABLES`], in its order.
pub type Dump = Vec<Vec<Vec<Value>>>;

pub trait DumpIndex {
    /// Every row of every table of [`TABLES`], read in one read transaction.
    fn dump(&self) -> IndexResult<Dump>;

    /// Whether any table of [`TABLES`] holds a row.
    fn holds_rows(&self) -> IndexResult<bool>;

    /// Inserts `dump` in one transaction (into an index without rows: ids are kept).
    fn load(&self, dump: &Dump) -> IndexResult<()>;
}

/// A `SELECT` of every column of `table`, in a stable order (the first column's).
pub(crate) fn select_all(table: &Table) -> String {
    format!(
        "SELECT {} FROM {} ORDER BY {}",
        table.column_list(),
        table.name,
        table.columns[0].0
    )
}
