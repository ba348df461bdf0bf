//! What an upload moved and what it did not need to.

use std::fmt;

/// Where deduplicated bytes were found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DedupSource {
    /// Earlier in this upload session.
    Session,
    /// The local shard cache.
    ShardCache,
    /// The server's global dedup answer.
    Global,
}

/// Byte counts for one file, or summed over a session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DedupStats {
    /// Size of the input.
    pub logical_bytes: u64,
    pub chunks: u64,
    /// Bytes found earlier in this session.
    pub session_bytes: u64,
    /// Bytes found in the local shard cache.
    pub shard_cache_bytes: u64,
    /// Bytes found through global dedup.
    pub global_bytes: u64,
    /// Bytes that go into new xorbs (before compression).
    pub new_bytes: u64,
    /// Global dedup queries sent.
    pub global_queries: u64,
}

impl DedupStats {
    pub fn deduped_bytes(&self) -> u64 {
        self.session_bytes + self.shard_cache_bytes + self.global_bytes
    }

    pub fn add_deduped(&mut self, source: DedupSource, bytes: u64) {
        match source {
            DedupSource::Session => self.session_bytes += bytes,
            DedupSource::ShardCache => self.shard_cache_bytes += bytes,
            DedupSource::Global => self.global_bytes += bytes,
        }
    }

    pub fn merge(&mut self, other: &DedupStats) {
        self.logical_bytes += other.logical_bytes;
        self.chunks += other.chunks;
        self.session_bytes += other.session_bytes;
        self.shard_cache_bytes += other.shard_cache_bytes;
        self.global_bytes += other.global_bytes;
        self.new_bytes += other.new_bytes;
        self.global_queries += other.global_queries;
    }
}

/// Totals of one upload session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SessionStats {
    pub files: u64,
    pub dedup: DedupStats,
    /// Serialized xorb bytes sent (after compression, headers and footers included).
    pub xorb_bytes_sent: u64,
    pub xorbs_uploaded: u64,
    /// Xorbs the server already had (sent, but not stored anew).
    pub xorbs_already_present: u64,
    pub shards_uploaded: u64,
    pub shard_bytes_sent: u64,
}

use git_xet_io::human::human_bytes;

impl fmt::Display for SessionStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = &self.dedup;
        let pct = |x: u64| {
            if d.logical_bytes == 0 {
                0.0
            } else {
                100.0 * x as f64 / d.logical_bytes as f64
            }
        };
        writeln!(
            f,
            "{} file(s), {} in {} chunks",
            self.files,
            human_bytes(d.logical_bytes),
            d.chunks
        )?;
        writeln!(
            f,
            "  deduplicated: {} ({:.1}%): session {}, shard cache {}, global {} ({} queries)",
            human_bytes(d.deduped_bytes()),
            pct(d.deduped_bytes()),
            human_bytes(d.session_bytes),
            human_bytes(d.shard_cache_bytes),
            human_bytes(d.global_bytes),
            d.global_queries
        )?;
        writeln!(
            f,
            "  new: {} ({:.1}%)",
            human_bytes(d.new_bytes),
            pct(d.new_bytes)
        )?;
        write!(
            f,
            "  sent: {} in {} xorb(s) ({} already on the server), {} shard(s) ({})",
            human_bytes(self.xorb_bytes_sent),
            self.xorbs_uploaded,
            self.xorbs_already_present,
            self.shards_uploaded,
            human_bytes(self.shard_bytes_sent)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_well() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
    }

    #[test]
    fn dedup_sources_add_up() {
        let mut s = DedupStats {
            logical_bytes: 100,
            ..Default::default()
        };
        s.add_deduped(DedupSource::Session, 10);
        s.add_deduped(DedupSource::ShardCache, 20);
        s.add_deduped(DedupSource::Global, 30);
        assert_eq!(s.deduped_bytes(), 60);
        let mut total = DedupStats::default();
        total.merge(&s);
        total.merge(&s);
        assert_eq!(total.deduped_bytes(), 120);
        assert_eq!(total.logical_bytes, 200);
    }
}
