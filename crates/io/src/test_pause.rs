//! The pause the test hooks share (feature `test-hooks` only): a test names a directory, a
//! server or upkeep command marks that it reached a point and waits there until the test lets it go on, so that
//! a test can run something at exactly that point (an upload during gc, two stored xorbs
//! interleaved).

use std::path::Path;
use std::time::Duration;

/// Creates `DIR/<name>.reached`, then waits (up to two minutes) for `DIR/<name>.go`.
pub async fn reached(dir: &Path, name: &str, hook: &str) {
    let _ = std::fs::write(dir.join(format!("{name}.reached")), b"");
    let go = dir.join(format!("{name}.go"));
    for _ in 0..12_000 {
        if go.exists() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tracing::warn!(point = name, "{hook}: no go after two minutes; going on");
}
