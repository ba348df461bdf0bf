//! The logical dump of the SQLite index (see `crate::dump`).

use rusqlite::types::Value as SqlValue;

use super::SqliteIndex;
use crate::dump::{select_all, ColType, Dump, DumpIndex, Value, TABLES};
use crate::{IndexError, IndexResult};

fn from_sql(value: SqlValue, ty: ColType, table: &str) -> IndexResult<Value> {
    Ok(match (value, ty) {
        (SqlValue::Integer(i), ColType::Int | ColType::Int32) => Value::Int(i),
        (SqlValue::Integer(i), ColType::Bool) => Value::Bool(i != 0),
        (SqlValue::Text(s), ColType::Text) => Value::Text(s),
        (SqlValue::Blob(b), ColType::Blob | ColType::NullableBlob) => Value::Blob(b),
        (SqlValue::Null, ColType::NullableBlob) => Value::Null,
        (other, ty) => {
            return Err(IndexError::Corrupt(format!(
                "{table}: a {ty:?} column holds {other:?}"
            )))
        }
    })
}

fn to_sql(value: &Value) -> SqlValue {
    match value {
        Value::Int(i) => SqlValue::Integer(*i),
        Value::Bool(b) => SqlValue::Integer(i64::from(*b)),
        Value::Text(s) => SqlValue::Text(s.clone()),
        Value::Blob(b) => SqlValue::Blob(b.clone()),
        Value::Null => SqlValue::Null,
    }
}

impl DumpIndex for SqliteIndex {
    fn dump(&self) -> IndexResult<Dump> {
        self.read(|conn| {
            // A deferred transaction: its first read fixes the snapshot (WAL) every later
            // read of it sees, whatever the writer commits meanwhile.
            conn.execute_batch("BEGIN")?;
            let result = (|| {
                let mut dump = Dump::new();
                for table in TABLES {
                    let mut stmt = conn.prepare(&select_all(table))?;
                    let mut rows = stmt.query([])?;
                    let mut out = Vec::new();
                    while let Some(row) = rows.next()? {
                        let mut values = Vec::with_capacity(table.columns.len());
                        for (i, (_, ty)) in table.columns.iter().enumerate() {
                            values.push(from_sql(row.get(i)?, *ty, table.name)?);
                        }
                        out.push(values);
                    }
                    dump.push(out);
                }
                Ok(dump)
            })();
            conn.execute_batch("COMMIT")?;
            result
        })
    }

    fn holds_rows(&self) -> IndexResult<bool> {
        self.read(|conn| {
            for table in TABLES {
                let sql = format!("SELECT EXISTS (SELECT 1 FROM {})", table.name);
                let any: bool = conn.query_row(&sql, [], |r| r.get(0))?;
                if any {
                    return Ok(true);
                }
            }
            Ok(false)
        })
    }

    fn load(&self, dump: &Dump) -> IndexResult<()> {
        self.write(|tx| {
            for (table, rows) in TABLES.iter().zip(dump) {
                let marks: Vec<String> =
                    (1..=table.columns.len()).map(|i| format!("?{i}")).collect();
                let sql = format!(
                    "INSERT INTO {} ({}) VALUES ({})",
                    table.name,
                    table.column_list(),
                    marks.join(", ")
                );
                let mut stmt = tx.prepare(&sql)?;
                for row in rows {
                    let values: Vec<SqlValue> = row.iter().map(to_sql).collect();
                    stmt.execute(rusqlite::params_from_iter(values))?;
                }
            }
            Ok(())
        })
    }
}
