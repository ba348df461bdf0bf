//! The logical dump of the PostgreSQL index (see `crate::dump`).

use tokio_postgres::types::ToSql;
use tokio_postgres::{IsolationLevel, Row};

use super::pool::wait;
use super::{PgIndex, PgResult};
use crate::dump::{select_all, ColType, Dump, DumpIndex, Table, Value, TABLES};
use crate::IndexResult;

/// Rows per multi-row INSERT (PostgreSQL takes at most 65535 parameters per statement).
const BATCH: usize = 500;

fn from_row(row: &Row, table: &Table) -> PgResult<Vec<Value>> {
    let mut values = Vec::with_capacity(table.columns.len());
    for (i, (_, ty)) in table.columns.iter().enumerate() {
        values.push(match ty {
            ColType::Int => Value::Int(row.try_get::<_, i64>(i)?),
            ColType::Int32 => Value::Int(i64::from(row.try_get::<_, i32>(i)?)),
            ColType::Text => Value::Text(row.try_get(i)?),
            ColType::Blob => Value::Blob(row.try_get(i)?),
            ColType::Bool => Value::Bool(row.try_get(i)?),
            ColType::NullableBlob => match row.try_get::<_, Option<Vec<u8>>>(i)? {
                Some(b) => Value::Blob(b),
                None => Value::Null,
            },
        });
    }
    Ok(values)
}

fn to_sql(value: &Value, ty: ColType) -> Box<dyn ToSql + Sync> {
    match (value, ty) {
        // Out of range only in a dump that did not come from an index (checked on read).
        (Value::Int(i), ColType::Int32) => Box::new(i32::try_from(*i).unwrap_or(i32::MAX)),
        (Value::Int(i), _) => Box::new(*i),
        (Value::Bool(b), _) => Box::new(*b),
        (Value::Text(s), _) => Box::new(s.clone()),
        (Value::Blob(b), _) => Box::new(b.clone()),
        (Value::Null, _) => Box::new(None::<Vec<u8>>),
    }
}

impl DumpIndex for PgIndex {
    fn dump(&self) -> IndexResult<Dump> {
        self.pool.run(|c| {
            // One snapshot for every table, however long the reading takes.
            let tx = wait(
                c.build_transaction()
                    .isolation_level(IsolationLevel::RepeatableRead)
                    .read_only(true)
                    .start(),
            )?;
            let mut dump = Dump::new();
            for table in TABLES {
                let rows = wait(tx.query(&select_all(table), &[]))?;
                dump.push(
                    rows.iter()
                        .map(|r| from_row(r, table))
                        .collect::<PgResult<_>>()?,
                );
            }
            wait(tx.commit())?;
            Ok(dump)
        })
    }

    fn holds_rows(&self) -> IndexResult<bool> {
        self.pool.run(|c| {
            for table in TABLES {
                let sql = format!("SELECT EXISTS (SELECT 1 FROM {})", table.name);
                if wait(c.query_one(&sql, &[]))?.get::<_, bool>(0) {
                    return Ok(true);
                }
            }
            Ok(false)
        })
    }

    fn load(&self, dump: &Dump) -> IndexResult<()> {
        self.pool.run(|c| {
            let tx = wait(c.transaction())?;
            for (table, rows) in TABLES.iter().zip(dump) {
                let width = table.columns.len();
                for batch in rows.chunks(BATCH) {
                    let mut groups = Vec::with_capacity(batch.len());
                    let mut params: Vec<Box<dyn ToSql + Sync>> = Vec::new();
                    for row in batch {
                        let base = params.len();
                        let marks: Vec<String> =
                            (1..=width).map(|i| format!("${}", base + i)).collect();
                        groups.push(format!("({})", marks.join(", ")));
                        for (value, (_, ty)) in row.iter().zip(table.columns) {
                            params.push(to_sql(value, *ty));
                        }
                    }
                    let sql = format!(
                        "INSERT INTO {} ({}) VALUES {}",
                        table.name,
                        table.column_list(),
                        groups.join(", ")
                    );
                    let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| &**p).collect();
                    wait(tx.execute(&sql, &refs))?;
                }
            }
            // New xorbs get ids after the restored ones.
            wait(tx.execute(
                "SELECT setval(pg_get_serial_sequence('xorbs', 'id'),
                               GREATEST((SELECT MAX(id) FROM xorbs), 1))",
                &[],
            ))?;
            wait(tx.commit())
        })?;
        Ok(())
    }
}

impl PgIndex {
    /// Makes `secret` the deployment's signing secret (a restore into a deployment that has
    /// nothing else: a server started once may have created another).
    pub fn replace_secret(&self, secret: &[u8; 32]) -> IndexResult<()> {
        self.pool.run(|c| super::secret::replace(c, secret))?;
        Ok(())
    }
}
