//! Numbers for people: sizes and ratios as every command prints them.

/// `logical / stored` as a dedup ratio (`1.63x`), or why there is none.
pub fn dedup_ratio(logical: u64, stored: u64) -> String {
    if stored > 0 {
        format!("{:.2}x", logical as f64 / stored as f64)
    } else {
        "n/a (nothing new stored)".into()
    }
}

/// `1.5 GiB`-style sizes for people.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}
