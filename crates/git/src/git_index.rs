//! git's index file (`$GIT_DIR/index`, gitformat-index(5)) read without git: which blob each
//! path holds at stage 0. The filter asks it whether a re-cleaned file's index entry is
//! exactly the pointer the clean produces (a blob id comparison: equal ids, equal content),
//! instead of a `git cat-file` round trip per file.
//!
//! Versions 2, 3 and 4 (prefix-compressed paths) with SHA-1 or SHA-256 ids. Anything this
//! reader does not fully understand is an error, never a partial answer: a split index
//! (`link`), a sparse index (`sdir`, directory entries), an unknown required extension, a
//! checksum or bounds failure. Every length is checked against the bytes that remain.

use std::collections::HashMap;
use std::path::Path;

use sha2::Digest;

/// The repository's object id hash (`extensions.objectFormat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectFormat {
    Sha1,
    Sha256,
}

impl ObjectFormat {
    /// From `extensions.objectFormat` (unset: SHA-1); None for a format git does not know.
    pub fn from_config(value: Option<&str>) -> Option<ObjectFormat> {
        match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
            None | Some("sha1") => Some(ObjectFormat::Sha1),
            Some("sha256") => Some(ObjectFormat::Sha256),
            Some(_) => None,
        }
    }

    pub fn len(self) -> usize {
        match self {
            ObjectFormat::Sha1 => 20,
            ObjectFormat::Sha256 => 32,
        }
    }

    fn digest(self, parts: &[&[u8]]) -> Vec<u8> {
        match self {
            ObjectFormat::Sha1 => {
                let mut h = sha1::Sha1::new();
                parts.iter().for_each(|p| h.update(p));
                h.finalize().to_vec()
            }
            ObjectFormat::Sha256 => {
                let mut h = sha2::Sha256::new();
                parts.iter().for_each(|p| h.update(p));
                h.finalize().to_vec()
            }
        }
    }

    /// The id git gives a blob of this content (`git hash-object`).
    pub fn blob_id(self, content: &[u8]) -> Vec<u8> {
        let header = format!("blob {}\0", content.len());
        self.digest(&[header.as_bytes(), content])
    }
}

/// Why an index file cannot be used (the caller asks git instead).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Unreadable {
    #[error("the index ends early ({0})")]
    Truncated(&'static str),
    #[error("not an index file")]
    Signature,
    #[error("index version {0} is not read here")]
    Version(u32),
    #[error("the index's checksum does not match")]
    Checksum,
    #[error("a malformed index entry ({0})")]
    BadEntry(&'static str),
    #[error("a split index (its entries are in a shared index)")]
    Split,
    #[error("a sparse index (directory entries)")]
    Sparse,
    #[error("an unknown required index extension {0:?}")]
    Extension(String),
    #[error("the index changed while it was read")]
    Changed,
    #[error("reading the index: {0}")]
    Io(String),
}

/// What the index holds for one path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A stage-0 entry and its object id.
    Blob(Vec<u8>),
    /// Entries of other stages (a conflict): no single answer.
    Conflicted,
}

/// The entries of one index file, by path.
#[derive(Debug)]
pub struct IndexFile {
    pub format: ObjectFormat,
    entries: HashMap<Vec<u8>, Entry>,
}

impl IndexFile {
    /// What the index holds for `path` (None: no entry).
    pub fn get(&self, path: &[u8]) -> Option<&Entry> {
        self.entries.get(path)
    }

    /// How many paths have entries.
    #[cfg(test)]
    pub fn paths(&self) -> usize {
        self.entries.len()
    }

    /// Reads the index at `path`. The bytes read must be the whole file as it was opened and
    /// still is afterwards (same inode, size and mtime): an index replaced meanwhile is not used.
    pub fn load(path: &Path, format: ObjectFormat) -> Result<IndexFile, Unreadable> {
        use std::io::Read;
        use std::os::unix::fs::MetadataExt;
        let io = |e: std::io::Error| Unreadable::Io(e.to_string());
        let file = std::fs::File::open(path).map_err(io)?;
        let before = file.metadata().map_err(io)?;
        let mut bytes = Vec::new();
        // Never more than the file said it held (plus one byte, to notice growth).
        file.take(before.len().saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(io)?;
        let after = std::fs::metadata(path).map_err(io)?;
        let id = |m: &std::fs::Metadata| (m.dev(), m.ino(), m.len(), m.mtime(), m.mtime_nsec());
        if bytes.len() as u64 != before.len() || id(&before) != id(&after) {
            return Err(Unreadable::Changed);
        }
        IndexFile::parse(&bytes, format)
    }

    /// Parses an index file's bytes.
    pub fn parse(bytes: &[u8], format: ObjectFormat) -> Result<IndexFile, Unreadable> {
        let hash_len = format.len();
        if bytes.len() < 12 + hash_len {
            return Err(Unreadable::Truncated("header"));
        }
        let (body, trailer) = bytes.split_at(bytes.len() - hash_len);
        // git writes no checksum with `index.skipHash` (all zeros) and then checks none.
        if trailer.iter().any(|&b| b != 0) && format.digest(&[body]) != trailer {
            return Err(Unreadable::Checksum);
        }
        let mut r = Reader {
            bytes: body,
            pos: 0,
        };
        if r.take(4, "signature")? != b"DIRC" {
            return Err(Unreadable::Signature);
        }
        let version = r.u32("version")?;
        if !(2..=4).contains(&version) {
            return Err(Unreadable::Version(version));
        }
        let count = r.u32("entry count")? as usize;
        // The smallest entry takes more than 40 bytes: the count cannot ask for more.
        let mut entries = HashMap::with_capacity(count.min(body.len() / 40));
        let mut path = Vec::new();
        let mut nameless = false;
        for _ in 0..count {
            let start = r.pos;
            let stat = r.take(40, "entry")?;
            let mode = u32::from_be_bytes(stat[24..28].try_into().expect("4 bytes"));
            let oid = r.take(hash_len, "entry id")?.to_vec();
            let flags = r.u16("entry flags")?;
            if flags & 0x4000 != 0 {
                if version < 3 {
                    return Err(Unreadable::BadEntry("extended flags before version 3"));
                }
                r.u16("extended flags")?;
            }
            let name_len = usize::from(flags & 0x0fff);
            if version == 4 {
                let strip = r.varint()?;
                let kept = path
                    .len()
                    .checked_sub(strip)
                    .ok_or(Unreadable::BadEntry("a prefix longer than the last path"))?;
                path.truncate(kept);
                path.extend_from_slice(r.until_nul("path")?);
            } else {
                path.clear();
                path.extend_from_slice(r.until_nul("path")?);
                // NUL padding up to a multiple of 8 bytes, at least one NUL (read above).
                let len = (r.pos - 1 - start + 8) & !7;
                let pad = (start + len)
                    .checked_sub(r.pos)
                    .ok_or(Unreadable::BadEntry("padding"))?;
                if r.take(pad, "padding")?.iter().any(|&b| b != 0) {
                    return Err(Unreadable::BadEntry("padding"));
                }
            }
            if name_len < 0x0fff && path.len() != name_len {
                return Err(Unreadable::BadEntry("path length"));
            }
            if path.is_empty() {
                // A split index strips the names of entries that replace the shared
                // index's: refused below, at its `link` extension.
                nameless = true;
                continue;
            }
            if mode & 0o170000 == 0o040000 {
                return Err(Unreadable::Sparse); // a sparse index's directory entry
            }
            let stage = (flags >> 12) & 3;
            entries
                .entry(path.clone())
                .and_modify(|e| *e = Entry::Conflicted)
                .or_insert(match stage {
                    0 => Entry::Blob(oid),
                    _ => Entry::Conflicted,
                });
        }
        while r.pos < body.len() {
            let signature = r.take(4, "extension")?;
            let size = r.u32("extension size")? as usize;
            r.take(size, "extension data")?;
            match signature {
                b"link" => return Err(Unreadable::Split),
                b"sdir" => return Err(Unreadable::Sparse),
                // Optional extensions start with a capital letter (cache tree, untracked...).
                [b'A'..=b'Z', ..] => {}
                other => {
                    return Err(Unreadable::Extension(
                        String::from_utf8_lossy(other).into_owned(),
                    ))
                }
            }
        }
        if nameless {
            return Err(Unreadable::BadEntry("empty path"));
        }
        Ok(IndexFile { format, entries })
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], Unreadable> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or(Unreadable::Truncated(what))?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, Unreadable> {
        Ok(u16::from_be_bytes(
            self.take(2, what)?.try_into().expect("2 bytes"),
        ))
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, Unreadable> {
        Ok(u32::from_be_bytes(
            self.take(4, what)?.try_into().expect("4 bytes"),
        ))
    }

    /// Bytes up to the next NUL, which is consumed too.
    fn until_nul(&mut self, what: &'static str) -> Result<&'a [u8], Unreadable> {
        let rest = &self.bytes[self.pos..];
        let n = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or(Unreadable::Truncated(what))?;
        self.pos += n + 1;
        Ok(&rest[..n])
    }

    /// git's offset varint (varint.c): each continuation adds one before shifting.
    fn varint(&mut self) -> Result<usize, Unreadable> {
        let mut c = self.take(1, "path prefix")?[0];
        let mut value = usize::from(c & 127);
        while c & 128 != 0 {
            value = value
                .checked_add(1)
                .and_then(|v| v.checked_mul(128))
                .ok_or(Unreadable::BadEntry("path prefix"))?;
            c = self.take(1, "path prefix")?[0];
            value |= usize::from(c & 127);
        }
        Ok(value)
    }
}

#[cfg(test)]
#[path = "git_index_tests.rs"]
mod tests;
