//! Sizes for people: the one formatter the programs' output and the server's web pages share
//! (pure, so that both sides and the page-building crate can use it without I/O).

/// A size for people: bytes below 1 KiB, then KiB, MiB, GiB, TiB (powers of 1024) with one
/// decimal (`1.5 GiB`).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}
