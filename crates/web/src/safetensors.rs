//! The header of a safetensors file, read from untrusted bytes: an 8-byte little-endian
//! length, then that many bytes of JSON naming each tensor's dtype, shape and byte range
//! (`data_offsets`, relative to the end of the header), and an optional `__metadata__` map
//! of strings. The page shows it as a table, so a checkpoint can be inspected without
//! downloading it.
//!
//! Nothing here trusts the file: the declared length is checked against [`MAX_HEADER`]
//! before anyone reads that much (callers read through [`header_len`]), nothing is allocated
//! from a declared number, shapes and sizes are multiplied with checks, and every failure is
//! a [`SafetensorsError`], never a panic.

use serde_json::Value;

/// Longest header read for a page. The format allows 100 MB; real checkpoints stay far
/// below 4 MiB (a tensor's entry is ~100 bytes).
pub const MAX_HEADER: u64 = 4 << 20;
/// Most tensors listed on a page; the others are counted.
pub const MAX_LISTED: usize = 5000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SafetensorsError {
    #[error("the file is shorter than the 8-byte header length")]
    Truncated,
    #[error("the header declares {0} bytes, over the {MAX_HEADER} shown here")]
    TooLong(u64),
    #[error("the header is not a JSON object: {0}")]
    NotJson(String),
    #[error("tensor {name:?}: {why}")]
    BadTensor { name: String, why: String },
}

/// One tensor as the header describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tensor {
    pub name: String,
    pub dtype: String,
    pub shape: Vec<u64>,
    /// Bytes from `data_offsets` (end - start).
    pub bytes: u64,
    /// Where its bytes start after the header.
    pub offset: u64,
}

/// A parsed header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// In file order (by offset), at most [`MAX_LISTED`].
    pub tensors: Vec<Tensor>,
    /// How many tensors there are in all.
    pub count: usize,
    /// Sum of every tensor's bytes.
    pub data_bytes: u64,
    /// The header's own length (the 8-byte prefix not included).
    pub header_bytes: u64,
    /// `__metadata__`, by key.
    pub metadata: Vec<(String, String)>,
}

/// The header length the first 8 bytes declare, checked against [`MAX_HEADER`].
pub fn header_len(prefix: &[u8]) -> Result<u64, SafetensorsError> {
    let bytes: [u8; 8] = prefix
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or(SafetensorsError::Truncated)?;
    let len = u64::from_le_bytes(bytes);
    if len > MAX_HEADER {
        return Err(SafetensorsError::TooLong(len));
    }
    Ok(len)
}

/// Bytes per element of a dtype the format names; `None` for one it does not.
fn dtype_bits(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "BOOL" | "U8" | "I8" | "F8_E5M2" | "F8_E4M3" | "F8_E8M0" => 8,
        "F4" => 4,
        "F6_E2M3" | "F6_E3M2" => 6,
        "I16" | "U16" | "F16" | "BF16" => 16,
        "I32" | "U32" | "F32" => 32,
        "I64" | "U64" | "F64" | "C64" => 64,
        _ => return None,
    })
}

/// Parses a whole file's beginning: the 8-byte length, then the header. `bytes` may be
/// longer than the header (the rest is ignored) but not shorter.
pub fn parse(bytes: &[u8]) -> Result<Header, SafetensorsError> {
    let len = header_len(bytes)?;
    let json = bytes
        .get(8..8 + len as usize)
        .ok_or(SafetensorsError::Truncated)?;
    parse_header(json)
}

/// Parses the JSON header itself (at most [`MAX_HEADER`] bytes).
pub fn parse_header(json: &[u8]) -> Result<Header, SafetensorsError> {
    if json.len() as u64 > MAX_HEADER {
        return Err(SafetensorsError::TooLong(json.len() as u64));
    }
    // The format pads the header with trailing spaces.
    let value: Value =
        serde_json::from_slice(json).map_err(|e| SafetensorsError::NotJson(e.to_string()))?;
    let Value::Object(map) = value else {
        return Err(SafetensorsError::NotJson("not an object".into()));
    };
    let mut tensors = Vec::new();
    let mut metadata = Vec::new();
    let mut data_bytes = 0u64;
    let mut count = 0usize;
    for (name, entry) in &map {
        if name == "__metadata__" {
            metadata = strings(entry);
            continue;
        }
        let tensor = tensor(name, entry)?;
        count += 1;
        data_bytes = data_bytes.saturating_add(tensor.bytes);
        tensors.push(tensor);
    }
    tensors.sort_by(|a, b| a.offset.cmp(&b.offset).then(a.name.cmp(&b.name)));
    tensors.truncate(MAX_LISTED);
    Ok(Header {
        tensors,
        count,
        data_bytes,
        header_bytes: json.len() as u64,
        metadata,
    })
}

fn strings(value: &Value) -> Vec<(String, String)> {
    let Value::Object(map) = value else {
        return Vec::new();
    };
    map.iter()
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), v)
        })
        .collect()
}

fn tensor(name: &str, entry: &Value) -> Result<Tensor, SafetensorsError> {
    let bad = |why: &str| SafetensorsError::BadTensor {
        name: name.chars().take(200).collect(),
        why: why.into(),
    };
    let dtype = entry
        .get("dtype")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no dtype"))?;
    let bits = dtype_bits(dtype).ok_or_else(|| bad("unknown dtype"))?;
    let shape: Vec<u64> = entry
        .get("shape")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no shape"))?
        .iter()
        .map(|d| {
            d.as_u64()
                .ok_or_else(|| bad("a dimension is not a whole number"))
        })
        .collect::<Result<_, _>>()?;
    let offsets = entry
        .get("data_offsets")
        .and_then(Value::as_array)
        .filter(|o| o.len() == 2)
        .ok_or_else(|| bad("data_offsets is not two numbers"))?;
    let (start, end) = match (offsets[0].as_u64(), offsets[1].as_u64()) {
        (Some(s), Some(e)) if s <= e => (s, e),
        _ => return Err(bad("data_offsets is not an ascending pair of numbers")),
    };
    let elements = shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .ok_or_else(|| bad("the shape's size overflows"))?;
    let expected = elements
        .checked_mul(bits)
        .map(|b| b.div_ceil(8))
        .ok_or_else(|| bad("the shape's size overflows"))?;
    if expected != end - start {
        return Err(bad(&format!(
            "the shape needs {expected} bytes but data_offsets give {}",
            end - start
        )));
    }
    Ok(Tensor {
        name: name.to_string(),
        dtype: dtype.to_string(),
        shape,
        bytes: end - start,
        offset: start,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn file(json: &str) -> Vec<u8> {
        let mut out = (json.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(json.as_bytes());
        out.extend_from_slice(&[0u8; 16]);
        out
    }

    #[test]
    fn a_real_header_lists_tensors_in_file_order() {
        let json = r#"{"__metadata__":{"format":"pt"},
            "b":{"dtype":"BF16","shape":[2,3],"data_offsets":[16,28]},
            "a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},
            "s":{"dtype":"I64","shape":[],"data_offsets":[28,36]}}   "#;
        let h = parse(&file(json)).unwrap();
        let names: Vec<_> = h.tensors.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "s"]);
        assert_eq!(h.tensors[1].shape, [2, 3]);
        assert_eq!(h.tensors[1].bytes, 12);
        assert_eq!((h.count, h.data_bytes), (3, 36));
        assert_eq!(h.metadata, [("format".to_string(), "pt".to_string())]);
    }

    #[test]
    fn hostile_headers_are_errors() {
        assert_eq!(parse(b"\x01\x02"), Err(SafetensorsError::Truncated));
        assert_eq!(
            parse(&u64::MAX.to_le_bytes()),
            Err(SafetensorsError::TooLong(u64::MAX))
        );
        let mut short = 100u64.to_le_bytes().to_vec();
        short.extend_from_slice(b"{}");
        assert_eq!(parse(&short), Err(SafetensorsError::Truncated));
        for json in [
            "[]",
            "{",
            r#"{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,15]}}"#,
            r#"{"a":{"dtype":"F99","shape":[1],"data_offsets":[0,4]}}"#,
            r#"{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}"#,
            r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}}"#,
            r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}}"#,
            r#"{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}}"#,
            r#"{"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]}}"#,
            r#"{"a":7}"#,
        ] {
            assert!(parse(&file(json)).is_err(), "{json}");
        }
    }

    #[test]
    fn deep_nesting_is_refused_not_a_stack_overflow() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(matches!(
            parse(&file(&deep)),
            Err(SafetensorsError::NotJson(_))
        ));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = parse(&bytes);
        }

        #[test]
        fn arbitrary_json_headers_never_panic(
            names in proptest::collection::vec("[a-z_]{0,8}", 0..6),
            dims in proptest::collection::vec(proptest::collection::vec(any::<u64>(), 0..4), 0..6),
            offsets in proptest::collection::vec((any::<u64>(), any::<u64>()), 0..6),
            dtypes in proptest::collection::vec(prop_oneof!["F32", "BF16", "F4", "X", "U8"], 0..6),
        ) {
            let mut map = serde_json::Map::new();
            for (i, name) in names.iter().enumerate() {
                map.insert(name.clone(), serde_json::json!({
                    "dtype": dtypes.get(i).cloned().unwrap_or_default(),
                    "shape": dims.get(i).cloned().unwrap_or_default(),
                    "data_offsets": offsets.get(i).map(|(a, b)| vec![*a, *b]).unwrap_or_default(),
                }));
            }
            let json = serde_json::Value::Object(map).to_string();
            if let Ok(h) = parse(&file(&json)) {
                prop_assert!(h.tensors.len() <= h.count);
                for t in &h.tensors {
                    prop_assert_eq!(dtype_bits(&t.dtype).is_some(), true);
                }
            }
        }
    }
}
