//! How far ahead of a sequential reader blocks are fetched, and in what runs. A reader that
//! maps a checkpoint and copies one tensor out of it looks, to the mount, like any other
//! sequential stream (the kernel's page faults arrive as reads of up to 128 KiB, in order);
//! what it will not ask for is what lies past the tensor. So the read-ahead is a fraction
//! of what the stream has read in a row, and that fraction itself grows with the run: a
//! short run (one tensor of a few MiB) gets a few blocks ahead, a long one (a whole-file
//! `cat`, `cp`, `sha256sum`) an eighth of what it read, up to [`READ_AHEAD`].

use super::BLOCK_SIZE;

/// At most this many bytes are fetched ahead of a sequential reader (96 MiB).
pub const READ_AHEAD: u64 = 96 << 20;
/// Runs read in a row up to this length (32 MiB) get a read-ahead that is a growing
/// fraction of them, from nothing to an eighth at this length; longer runs an eighth. The
/// bytes fetched past the end of a run of `n` bytes are then at most
/// `n / 8 * min(n, CAREFUL_RUN) / CAREFUL_RUN`, and at least a block: 3% past a 4 MiB
/// tensor, 6% past a 16 MiB one, 12.5% past one of 32 MiB or more.
pub const CAREFUL_RUN: u64 = 32 << 20;
/// Read-ahead fetches runs of up to this many bytes (16 MiB) as one range: one
/// reconstruction query and one xorb range per run instead of one per block, several runs
/// in flight at once keep the link (and both ends' cores) busy. Adjacent runs share no
/// chunk (`crate::edges`).
pub const MAX_WINDOW: u64 = 16 << 20;
/// Runs shorter than this (2 MiB) are not cut: a short read-ahead is one range.
const MIN_WINDOW: u64 = 2 << 20;

/// Bytes to keep fetched ahead of a stream that has read `run` bytes in a row: at least a
/// block (the next read's), at most [`READ_AHEAD`].
pub fn ahead_of(run: u64) -> u64 {
    // An eighth of the run, scaled down by how far the run is from CAREFUL_RUN: in u128,
    // as run * run overflows u64 past 4 GiB.
    let scaled = u128::from(run / 8) * u128::from(run.min(CAREFUL_RUN)) / u128::from(CAREFUL_RUN);
    u64::try_from(scaled)
        .unwrap_or(u64::MAX)
        .clamp(BLOCK_SIZE, READ_AHEAD)
}

/// The length of the runs a read-ahead of `ahead` bytes is fetched in: a quarter of it, at
/// least [`MIN_WINDOW`] (or all of it when less), at most [`MAX_WINDOW`]; whole blocks.
pub fn window_of(ahead: u64) -> u64 {
    let window = (ahead / 4).clamp(MIN_WINDOW, MAX_WINDOW);
    window.div_ceil(BLOCK_SIZE).max(1) * BLOCK_SIZE
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// What a reader of a tensor of `n` bytes gets fetched past its end, against its size.
    fn past_the_end(n: u64) -> f64 {
        (ahead_of(n).div_ceil(BLOCK_SIZE) * BLOCK_SIZE) as f64 / n as f64
    }

    #[test]
    fn a_tensor_of_4_to_64_mib_gets_at_most_an_eighth_of_it_ahead() {
        for mib in [4, 5, 8, 12, 16, 24, 32, 48, 64] {
            let ratio = past_the_end(mib * MIB);
            assert!(
                ratio <= 0.126,
                "{mib} MiB: {ratio:.3} of it fetched past its end"
            );
        }
        // The smaller the run, the smaller the fraction.
        assert!(past_the_end(4 * MIB) <= 0.035, "{}", past_the_end(4 * MIB));
        assert!(past_the_end(8 * MIB) <= 0.035, "{}", past_the_end(8 * MIB));
        assert!(past_the_end(16 * MIB) <= 0.07, "{}", past_the_end(16 * MIB));
    }

    #[test]
    fn the_read_ahead_grows_with_the_run_to_its_bound() {
        let mut last = 0;
        for mib in (0..4096).step_by(16) {
            let ahead = ahead_of(mib * MIB);
            assert!(ahead >= last, "shrinks at {mib} MiB");
            assert!((BLOCK_SIZE..=READ_AHEAD).contains(&ahead));
            last = ahead;
        }
        assert_eq!(ahead_of(0), BLOCK_SIZE);
        assert_eq!(ahead_of(64 * MIB), 8 * MIB);
        assert_eq!(ahead_of(256 * MIB), 32 * MIB);
        assert_eq!(ahead_of(768 * MIB), READ_AHEAD);
        assert_eq!(ahead_of(u64::MAX), READ_AHEAD);
    }

    #[test]
    fn windows_are_whole_blocks_a_quarter_of_the_read_ahead_within_bounds() {
        assert_eq!(window_of(BLOCK_SIZE), MIN_WINDOW);
        assert_eq!(window_of(8 * MIB), MIN_WINDOW);
        assert_eq!(window_of(32 * MIB), 8 * MIB);
        assert_eq!(window_of(READ_AHEAD), MAX_WINDOW);
        assert_eq!(window_of(10 * MIB + 1) % BLOCK_SIZE, 0);
    }
}
