//! Fuzzes the shard parsers: the streaming parser, the lookup-table checks, and every lookup
//! through a footer. None may panic on any input.
#![no_main]

use git_xet_core::hash::MerkleHash;
use git_xet_core::shard::{parse_shard, ShardFile};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(parsed) = parse_shard(data) {
        let _ = parsed.lookup_problems();
    }
    if let Ok(mut file) = ShardFile::open(std::io::Cursor::new(data)) {
        let probe = data.get(48..80).and_then(MerkleHash::from_slice).unwrap_or_default();
        let _ = file.file(&probe);
        let _ = file.xorb(&probe);
        let _ = file.chunk(&probe);
        let _ = file.dedup_query(&[probe, MerkleHash::ZERO]);
        let _ = file.read_all();
    }
});
