//! The index dump as files: `index/<table>.jsonl`, one JSON array per row (integers as
//! numbers, text as strings, blobs as lowercase hex, booleans as booleans), the columns in
//! the order the manifest lists them.

use serde_json::Value as Json;

use super::{hex, BackupError};
#[cfg(test)]
use git_xet_index::dump::TABLES;
use git_xet_index::dump::{ColType, Table, Value};

pub fn path(table: &Table) -> String {
    format!("index/{}.jsonl", table.name)
}

pub fn encode(rows: &[Vec<Value>]) -> Vec<u8> {
    let mut out = Vec::new();
    for row in rows {
        let json: Vec<Json> = row
            .iter()
            .map(|v| match v {
                Value::Int(i) => Json::from(*i),
                Value::Text(s) => Json::from(s.as_str()),
                Value::Blob(b) => Json::from(hex(b)),
                Value::Bool(b) => Json::from(*b),
                Value::Null => Json::Null,
            })
            .collect();
        out.extend_from_slice(Json::Array(json).to_string().as_bytes());
        out.push(b'\n');
    }
    out
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

fn value(json: &Json, ty: ColType) -> Option<Value> {
    Some(match (json, ty) {
        (Json::Number(n), ColType::Int) => Value::Int(n.as_i64()?),
        (Json::Number(n), ColType::Int32) => {
            Value::Int(i64::from(i32::try_from(n.as_i64()?).ok()?))
        }
        (Json::String(s), ColType::Text) => Value::Text(s.clone()),
        (Json::String(s), ColType::Blob | ColType::NullableBlob) => Value::Blob(unhex(s)?),
        (Json::Null, ColType::NullableBlob) => Value::Null,
        (Json::Bool(b), ColType::Bool) => Value::Bool(*b),
        _ => return None,
    })
}

/// The rows of `table` from its file's bytes; a line that does not fit the columns is an
/// error naming the file and line.
pub fn decode(table: &Table, bytes: &[u8]) -> Result<Vec<Vec<Value>>, BackupError> {
    let name = path(table);
    let mut rows = Vec::new();
    for (n, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let bad = || {
            BackupError::Damaged(format!(
                "{name} line {}: not a row of {}",
                n + 1,
                table.name
            ))
        };
        let json: Json = serde_json::from_slice(line).map_err(|_| bad())?;
        let Json::Array(items) = json else {
            return Err(bad());
        };
        if items.len() != table.columns.len() {
            return Err(bad());
        }
        let row = items
            .iter()
            .zip(table.columns)
            .map(|(item, (_, ty))| value(item, *ty))
            .collect::<Option<Vec<Value>>>()
            .ok_or_else(bad)?;
        rows.push(row);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_and_bad_lines_are_refused() {
        let table = TABLES.iter().find(|t| t.name == "repo_files").unwrap();
        let rows = vec![
            vec![
                Value::Text("org/a".into()),
                Value::Blob(vec![0, 255, 16]),
                Value::Blob(vec![1; 32]),
                Value::Int(-5),
                Value::Null,
            ],
            vec![
                Value::Text("b".into()),
                Value::Blob(vec![]),
                Value::Blob(vec![2; 32]),
                Value::Int(i64::MAX),
                Value::Blob(vec![9; 44]),
            ],
        ];
        assert_eq!(decode(table, &encode(&rows)).unwrap(), rows);
        for bad in [
            &b"[1,2]\n"[..],
            b"{\"a\":1}\n",
            b"[\"org/a\",\"0g\",\"00\",1,null]\n",
            b"not json\n",
            b"[\"org/a\",\"00\",\"00\",1.5,null]\n",
        ] {
            assert!(matches!(decode(table, bad), Err(BackupError::Damaged(_))));
        }
    }
}
