//! Files moved by hf-xet and by our client through `git xet server`, read back by both.

use git_xet_core::MerkleHash;

use crate::common::*;

macro_rules! env_or_skip {
    () => {
        match Env::new() {
            Some(env) => env,
            None => return,
        }
    };
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hf_xet_uploads_and_both_clients_read_back_bit_exact() {
    let env = env_or_skip!();
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("random", random_bytes(3_000_000, 1)),
        ("text", text(2_500_000)),
        ("small", random_bytes(100, 2)),
    ];
    let paths: Vec<_> = files.iter().map(|(n, d)| env.file(n, d)).collect();
    let refs: Vec<&std::path::Path> = paths.iter().map(|p| p.as_path()).collect();
    let uploaded = env.hf_upload(&refs);
    // The xorbs went in footer-less and were accepted (not refused with 400).
    assert!(env.xorb_bytes_received() > 0.0);
    let ours = env.ours("meta", "read");
    for ((name, data), hf) in files.iter().zip(&uploaded) {
        assert_eq!(hf.size, data.len() as u64, "{name}");
        assert_eq!(hf.hash, xet_hash(data).to_hex(), "{name}: hf-xet's hash");
        let hash = MerkleHash::from_hex(&hf.hash).unwrap();
        let mine = our_download(&ours, &hash, &env.path(&format!("{name}.ours")), None).await;
        assert!(mine == *data, "{name}: our client read different bytes");
        let theirs = env.hf_download(&hf.hash, hf.size, &format!("{name}.hf"));
        assert!(theirs == *data, "{name}: hf-xet read different bytes");
    }
    // Ranges of hf-xet's upload, by both clients: inside a chunk, across chunks, the tail.
    let (data, hf) = (&files[0].1, &uploaded[0]);
    let hash = MerkleHash::from_hex(&hf.hash).unwrap();
    for (s, e) in [(10, 20), (70_000, 1_900_000), (2_999_000, 3_000_000)] {
        let mine = our_download(&ours, &hash, &env.path("r.ours"), Some((s, e - 1))).await;
        assert!(mine == data[s as usize..e as usize], "ours {s}..{e}");
        let theirs = env.hf_range(&hf.hash, hf.size, s, e);
        assert!(theirs == data[s as usize..e as usize], "hf-xet {s}..{e}");
    }
    // hf-xet asked v2 reconstructions and v2 shard uploads and was answered: no fallback
    // to v1 for either.
    let metrics = env.server.metrics();
    assert!(
        metrics.contains("route=\"reconstruction_v2\",status=\"200\""),
        "{metrics}"
    );
    assert!(
        metrics.contains("route=\"shard_upload_v2\",status=\"200\""),
        "{metrics}"
    );
    assert!(
        !metrics.contains("route=\"shard_upload\""),
        "hf-xet fell back to v1 shard uploads: {metrics}"
    );
    // Both clients fetched through range-bound URLs, each request inside its signed range.
    assert!(
        metrics.contains("route=\"xorb_data\",status=\"206\""),
        "{metrics}"
    );
    assert!(
        !metrics.contains("route=\"xorb_data\",status=\"403\""),
        "a client asked a fetch URL for bytes outside its range: {metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_uploads_are_read_bit_exact_by_hf_xet() {
    let env = env_or_skip!();
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("random", random_bytes(2_000_000, 3)),
        ("text", text(1_500_000)),
    ];
    let paths: Vec<_> = files.iter().map(|(n, d)| env.file(n, d)).collect();
    let refs: Vec<&std::path::Path> = paths.iter().map(|p| p.as_path()).collect();
    let writer = env.ours("meta", "write");
    let hashes = our_upload(&writer, &refs).await;
    // hf-xet computes the same hashes locally.
    let hf_hashes = env.hf_hash(&refs);
    for ((name, data), (ours, hf)) in files.iter().zip(hashes.iter().zip(&hf_hashes)) {
        assert_eq!(ours.to_hex(), hf.hash, "{name}: hashes differ");
        let theirs = env.hf_download(&hf.hash, data.len() as u64, &format!("{name}.hf"));
        assert!(theirs == *data, "{name}: hf-xet read different bytes");
    }
    let (data, hash) = (&files[1].1, hashes[1].to_hex());
    for (s, e) in [(0, 1), (123_456, 1_000_001), (1_400_000, 1_500_000)] {
        let theirs = env.hf_range(&hash, data.len() as u64, s, e);
        assert!(theirs == data[s as usize..e as usize], "hf-xet {s}..{e}");
    }
}

/// A second version uploaded by hf-xet after our client uploaded the first: hf-xet finds
/// the first version's chunks through global dedup (`/v1/chunks/default/...`) and sends
/// only the changed region's xorb bytes. And the other way round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_versions_deduplicate_across_clients() {
    let env = env_or_skip!();
    let v1 = random_bytes(8_000_000, 4);
    let v2 = with_insertion(&v1, 4_000_000, &random_bytes(100_000, 5));
    let p1 = env.file("v1", &v1);
    let p2 = env.file("v2", &v2);

    let writer = env.ours("meta", "write");
    our_upload(&writer, &[&p1]).await;
    let before = env.xorb_bytes_received();
    assert!(before >= v1.len() as f64);
    let hf = env.hf_upload(&[&p2]);
    let sent = env.xorb_bytes_received() - before;
    eprintln!(
        "hf-xet second version: {sent} xorb bytes received for a {}-byte file",
        v2.len()
    );
    // The insertion and the chunks around its two edges; nothing like the whole file.
    assert!(sent > 100_000.0, "{sent}");
    assert!(sent < 600_000.0, "{sent}");
    let metrics = env.server.metrics();
    assert!(
        metrics.contains("route=\"dedup_query\",status=\"200\""),
        "hf-xet found no chunk through global dedup: {metrics}"
    );
    let theirs = env.hf_download(&hf[0].hash, v2.len() as u64, "v2.hf");
    assert!(theirs == v2);
    let reader = env.ours("meta-r", "read");
    let hash = MerkleHash::from_hex(&hf[0].hash).unwrap();
    assert!(our_download(&reader, &hash, &env.path("v2.ours"), None).await == v2);

    // hf-xet first, then our client with a fresh cache.
    let w1 = random_bytes(6_000_000, 6);
    let w2 = with_insertion(&w1, 1_000_000, &random_bytes(50_000, 7));
    let q1 = env.file("w1", &w1);
    let q2 = env.file("w2", &w2);
    env.hf_upload(&[&q1]);
    let before = env.xorb_bytes_received();
    let fresh = env.ours("meta-fresh", "write");
    let hashes = our_upload(&fresh, &[&q2]).await;
    let sent = env.xorb_bytes_received() - before;
    eprintln!(
        "our client's second version: {sent} xorb bytes received for a {}-byte file",
        w2.len()
    );
    assert!(sent > 50_000.0 && sent < 600_000.0, "{sent}");
    let theirs = env.hf_download(&hashes[0].to_hex(), w2.len() as u64, "w2.hf");
    assert!(theirs == w2);
}
