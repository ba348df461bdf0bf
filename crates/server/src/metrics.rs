//! Request and storage counters, rendered as Prometheus text at `GET /metrics`.
//!
//! The names are a contract with dashboards and tests (docs/server-operations.md, "Metrics", lists
//! them). Counters count this process's events; the storage gauges are read from the index
//! at each scrape, so they hold after `gc` and agree between processes sharing an index.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use git_xet_index::IndexStats;

#[derive(Debug, Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(&'static str, u16), u64>>,
    pub xorb_bytes_received: AtomicU64,
    pub xorbs_stored: AtomicU64,
    pub xorb_bytes_served: AtomicU64,
    pub shards_registered: AtomicU64,
    pub shards_awaiting_xorbs: AtomicU64,
    pub lfs_basic_bytes_received: AtomicU64,
    pub lfs_basic_bytes_served: AtomicU64,
    pub dedup_hits: AtomicU64,
    pub dedup_misses: AtomicU64,
    pub xorb_grants_already_stored: AtomicU64,
    pub telemetry_reports: AtomicU64,
}

/// Adds `n` to a counter.
pub fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl Metrics {
    pub fn record_request(&self, route: &'static str, status: u16) {
        *self
            .requests
            .lock()
            .expect("metrics lock")
            .entry((route, status))
            .or_insert(0) += 1;
    }

    /// The Prometheus text: this process's counters, and the storage gauges from `storage`,
    /// the index's totals read for this scrape (`None`, the gauges left out, when the index
    /// could not be read: an absent series, not a wrong one).
    pub fn render(&self, storage: Option<IndexStats>) -> String {
        let mut out = String::new();
        out.push_str("# HELP git_xet_http_requests_total HTTP requests by route and status.\n");
        out.push_str("# TYPE git_xet_http_requests_total counter\n");
        for ((route, status), n) in self.requests.lock().expect("metrics lock").iter() {
            let _ = writeln!(
                out,
                "git_xet_http_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}"
            );
        }
        let counters: [(&str, &str, &AtomicU64); 9] = [
            (
                "git_xet_xorb_bytes_received_total",
                "Bytes of xorb bodies accepted by the xorb upload route.",
                &self.xorb_bytes_received,
            ),
            (
                "git_xet_xorbs_stored_total",
                "Xorbs newly stored (uploaded or built from LFS uploads).",
                &self.xorbs_stored,
            ),
            (
                "git_xet_xorb_bytes_served_total",
                "Bytes sent by the xorb data route that fetch URLs point to.",
                &self.xorb_bytes_served,
            ),
            (
                "git_xet_shards_registered_total",
                "Shards that registered something new.",
                &self.shards_registered,
            ),
            (
                "git_xet_shards_awaiting_xorbs_total",
                "Shard uploads that waited for xorbs their client was still sending.",
                &self.shards_awaiting_xorbs,
            ),
            (
                "git_xet_lfs_basic_bytes_received_total",
                "Bytes of git-lfs basic uploads accepted.",
                &self.lfs_basic_bytes_received,
            ),
            (
                "git_xet_lfs_basic_bytes_served_total",
                "Bytes sent by git-lfs basic downloads.",
                &self.lfs_basic_bytes_served,
            ),
            (
                "git_xet_xorb_grants_already_stored_total",
                "Upload grant requests answered 200: the xorb is stored, the client skips it.",
                &self.xorb_grants_already_stored,
            ),
            (
                "git_xet_telemetry_reports_total",
                "Client telemetry reports received (dropped unread).",
                &self.telemetry_reports,
            ),
        ];
        for (name, help, value) in counters {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                value.load(Ordering::Relaxed)
            );
        }
        out.push_str("# HELP git_xet_dedup_queries_total Global dedup queries by result.\n");
        out.push_str("# TYPE git_xet_dedup_queries_total counter\n");
        let _ = writeln!(
            out,
            "git_xet_dedup_queries_total{{result=\"hit\"}} {}",
            self.dedup_hits.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "git_xet_dedup_queries_total{{result=\"miss\"}} {}",
            self.dedup_misses.load(Ordering::Relaxed)
        );
        let Some(storage) = storage else {
            return out;
        };
        let gauges = [
            ("git_xet_stored_xorbs", "Xorbs in storage.", storage.xorbs),
            (
                "git_xet_stored_xorb_bytes",
                "Serialized bytes of the xorbs in storage.",
                storage.xorb_bytes,
            ),
            (
                "git_xet_registered_files",
                "Distinct files registered.",
                storage.files,
            ),
        ];
        for (name, help, value) in gauges {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
            );
        }
        out
    }
}
