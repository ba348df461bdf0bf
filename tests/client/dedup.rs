//! Bytes that need not move do not move: counted with the server's own metrics.

use git_xet_client::{DownloadOptions, LocalSource, Mapper};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_uploading_a_file_sends_no_xorb() {
    let env = Env::new();
    let data = random_bytes(8 << 20, 21);
    let path = env.file("f", &data);
    let first = upload(&env.client("meta"), &[&path]).await;
    assert!(first.stats.xorbs_uploaded >= 1);
    let received = env.xorb_bytes_received();

    let again = upload(&env.client("meta"), &[&path]).await;
    assert_eq!(env.xorb_bytes_received(), received, "no xorb bytes sent");
    assert_eq!(again.stats.xorbs_uploaded, 0);
    assert_eq!(again.stats.dedup.shard_cache_bytes, data.len() as u64);
    assert_eq!(again.files[0].file_hash, first.files[0].file_hash);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inserting_100_bytes_sends_only_the_changed_chunks() {
    let env = Env::new();
    let v1 = random_bytes(4 << 20, 22);
    let v2 = with_insertion(&v1, 2 << 20, &random_bytes(100, 23));
    let p1 = env.file("v1", &v1);
    let p2 = env.file("v2", &v2);
    upload(&env.client("meta"), &[&p1]).await;
    let before = env.xorb_bytes_received();

    let summary = upload(&env.client("meta"), &[&p2]).await;
    let sent = env.xorb_bytes_received() - before;
    let changed = changed_bytes(&v1, &v2);
    assert!(
        changed > 0 && changed <= 3 * 128 * 1024,
        "changed chunks: {changed} bytes"
    );
    assert_eq!(summary.stats.dedup.new_bytes, changed);
    assert_eq!(
        summary.stats.dedup.shard_cache_bytes,
        v2.len() as u64 - changed
    );
    // Random data does not compress: what was sent is the changed chunks plus headers.
    assert!(
        sent >= changed as f64 && sent < changed as f64 + 4096.0,
        "sent {sent} for {changed} changed bytes"
    );
    let out = env.path("v2.out");
    download(&env.client("meta"), &summary.files[0].file_hash, &out, &v2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_content_dedups_through_the_shard_cache_and_then_global_dedup() {
    let env = Env::new();
    let shared = random_bytes(4 << 20, 31);
    let a = env.file("a", &shared);
    upload(&env.client("meta"), &[&a]).await;

    // A new file that starts with the same content, same metadata directory.
    let mut b_bytes = shared.clone();
    b_bytes.extend_from_slice(&random_bytes(2 << 20, 32));
    let b = env.file("b", &b_bytes);
    let before = env.xorb_bytes_received();
    let s = upload(&env.client("meta"), &[&b]).await;
    let common = v_common(&shared, &b_bytes);
    assert_eq!(s.stats.dedup.shard_cache_bytes, common);
    assert_eq!(s.stats.dedup.global_bytes, 0);
    assert!((env.xorb_bytes_received() - before) < (b_bytes.len() as u64 - common + 4096) as f64);

    // Same again with the shard cache gone: the server's global dedup finds it.
    let mut c_bytes = shared.clone();
    c_bytes.extend_from_slice(&random_bytes(2 << 20, 33));
    let c = env.file("c", &c_bytes);
    let before = env.xorb_bytes_received();
    let s = upload(&env.client("fresh-meta"), &[&c]).await;
    let common = v_common(&shared, &c_bytes);
    assert!(s.stats.dedup.global_queries >= 1);
    assert_eq!(s.stats.dedup.global_bytes, common, "{}", s.stats);
    assert!((env.xorb_bytes_received() - before) < (c_bytes.len() as u64 - common + 4096) as f64);
    download(
        &env.client("fresh-meta"),
        &s.files[0].file_hash,
        &env.path("c.out"),
        &c_bytes,
    )
    .await;
}

/// A small file does not wait for the global dedup answer about its first chunk (it is
/// sent as new data), but the answer is kept for later uploads. A larger file waits and
/// dedups.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_files_keep_global_dedup_answers_for_later_instead_of_waiting() {
    let env = Env::new();
    let small = random_bytes(100_000, 35);
    let large = random_bytes(400_000, 36);
    let (small_a, large_a) = (env.file("small-a", &small), env.file("large-a", &large));
    // Two sessions, so that the two files are in different xorbs.
    upload(&env.client("meta-a"), &[&small_a]).await;
    upload(&env.client("meta-a"), &[&large_a]).await;

    let other = env.client("meta-b");
    let small_b = env.file("small-b", &small);
    let before = env.xorb_bytes_received();
    let s = upload(&other, &[&small_b]).await;
    assert_eq!(s.stats.dedup.global_queries, 1, "{}", s.stats);
    assert_eq!(s.stats.dedup.global_bytes, 0, "{}", s.stats);
    assert_eq!(s.stats.dedup.new_bytes, small.len() as u64);
    assert!(env.xorb_bytes_received() - before >= small.len() as f64);
    let answers = other
        .config()
        .shard_cache_dir()
        .unwrap()
        .join("dedup-shards");
    assert_eq!(files_under(&answers).len(), 1, "the answer was kept");
    download(
        &other,
        &s.files[0].file_hash,
        &env.path("small.out"),
        &small,
    )
    .await;

    let large_b = env.file("large-b", &large);
    let before = env.xorb_bytes_received();
    let s = upload(&other, &[&large_b]).await;
    assert_eq!(
        s.stats.dedup.global_bytes,
        large.len() as u64,
        "{}",
        s.stats
    );
    assert_eq!(env.xorb_bytes_received(), before);
}

/// Bytes of `new` in chunks that `old` also has.
fn v_common(old: &[u8], new: &[u8]) -> u64 {
    new.len() as u64 - changed_bytes(old, new)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_version_downloads_only_the_changed_chunks() {
    let env = Env::new();
    // Another clone: pulls v1 (its reconstruction is recorded), then v2 reusing v1.
    let t = TwoVersions::set_up(
        &env,
        41,
        5 << 20,
        b"a small edit in the middle of a big file",
    )
    .await;
    let (v1, v2, h1, h2, puller, local_v1) = (t.v1, t.v2, t.h1, t.h2, t.puller, t.local_v1);
    let served = env.xorb_bytes_served();

    let options = DownloadOptions {
        expected_sha256: Some(sha256(&v2)),
        sources: vec![LocalSource {
            path: local_v1.clone(),
            file_hash: Some(h1),
            sha256: None,
        }],
        ..Default::default()
    };
    let out = env.path("clone/v2");
    let outcome = puller.download(&h2, &out, options).await.unwrap();
    assert!(std::fs::read(&out).unwrap() == v2);
    let fetched = env.xorb_bytes_served() - served;
    let changed = changed_bytes(&v1, &v2);
    assert_eq!(fetched as u64, outcome.network_bytes);
    assert!(
        fetched >= changed as f64 && fetched < (changed + 4096) as f64,
        "fetched {fetched} for {changed} changed bytes"
    );
    assert_eq!(outcome.local_bytes, v2.len() as u64 - changed);

    // The same through the sha256 of the local copy, as the transfer agent knows it.
    let options = DownloadOptions {
        sources: vec![LocalSource {
            path: local_v1,
            file_hash: None,
            sha256: Some(sha256(&v1)),
        }],
        ..Default::default()
    };
    let outcome = puller
        .download(&h2, &env.path("clone/v2-again"), options)
        .await
        .unwrap();
    assert_eq!(outcome.local_bytes, v2.len() as u64 - changed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chunk_cache_serves_a_repeated_download() {
    let env = Env::new();
    let (client, hash, data) = env.cached_download(3 << 20, 51).await;
    let served = env.xorb_bytes_served();
    let outcome = client
        .download(&hash, &env.path("two"), DownloadOptions::default())
        .await
        .unwrap();
    assert_eq!(
        env.xorb_bytes_served(),
        served,
        "nothing fetched the second time"
    );
    assert_eq!(outcome.network_bytes, 0);
    assert!(outcome.cache_bytes >= data.len() as u64);
    assert!(std::fs::read(env.path("two")).unwrap() == data);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intermediate_shards_register_xorbs_early_and_feed_the_shard_cache() {
    let env = Env::new();
    let data = random_bytes(70 << 20, 61);
    let path = env.file("big", &data);
    let mut config = env.config("meta");
    config.shard_flush_chunks = 1; // a shard after every closed xorb
    let client = git_xet_client::CasClient::new(config).unwrap();
    let summary = upload(&client, &[&path]).await;
    assert_eq!(summary.stats.xorbs_uploaded, 2);
    // One shard with the first xorb only, then the final one with the file and the second.
    assert_eq!(summary.stats.shards_uploaded, 2);
    let shard_dir = client.config().shard_cache_dir().unwrap().join("shards");
    assert!(shard_dir.starts_with(env.path("meta/servers")));
    assert_eq!(files_under(&shard_dir).len(), 2);
    let received = env.xorb_bytes_received();
    let again = upload(&client, &[&path]).await;
    assert_eq!(again.stats.dedup.shard_cache_bytes, data.len() as u64);
    assert_eq!(env.xorb_bytes_received(), received);
    download(
        &client,
        &summary.files[0].file_hash,
        &env.path("out"),
        &data,
    )
    .await;
}

/// The chunks of `data` as git-xet's clean filter records them.
fn chunk_list_of(data: &[u8]) -> git_xet_client::chunk_lists::ChunkList {
    let mut feed = git_xet_io::pipeline::ChunkFeed::new();
    for piece in data.chunks(65_516) {
        feed.feed(piece);
    }
    let chunked = feed.finish().expect("inputs over one block are chunked");
    git_xet_client::chunk_lists::ChunkList {
        sha256: <sha2::Sha256 as sha2::Digest>::digest(data).into(),
        file_hash: chunked.summary.file_hash,
        chunks: chunked.chunks,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_with_a_chunk_list_uploads_like_a_chunked_one() {
    let env = Env::new();
    // Past the first 16 MiB window of the file, so that the windows are exercised.
    let v1 = random_bytes(20 << 20, 41);
    let v2 = with_insertion(&v1, 17 << 20, &random_bytes(3000, 42));
    let p1 = env.file("v1", &v1);
    let p2 = env.file("v2", &v2);
    let first = upload(&env.client("meta"), &[&p1]).await;
    let before = env.xorb_bytes_received();

    let client = env.client("meta");
    let mut session = client.start_upload().await.unwrap();
    let listed = session
        .add_chunked_file(&p2, chunk_list_of(&v2), Mapper::reading(), None)
        .await
        .unwrap();
    let summary = session.finish().await.unwrap();
    let reference = git_xet_io::pipeline::hash_stream(&v2[..], true).unwrap();
    assert_eq!(listed.file_hash, reference.file_hash);
    assert_eq!(Some(listed.sha256), reference.sha256);
    let changed = changed_bytes(&v1, &v2);
    assert_eq!(summary.stats.dedup.new_bytes, changed);
    let sent = env.xorb_bytes_received() - before;
    assert!(sent < changed as f64 + 4096.0, "sent {sent} for {changed}");
    assert_ne!(first.files[0].file_hash, listed.file_hash);
    download(
        &env.client("other"),
        &listed.file_hash,
        &env.path("out"),
        &v2,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_list_that_does_not_match_the_file_registers_nothing() {
    let env = Env::new();
    let real = random_bytes(6 << 20, 43);
    let other = random_bytes(6 << 20, 44);
    let path = env.file("f", &real);
    let mut wrong = chunk_list_of(&other);
    wrong.sha256 = <sha2::Sha256 as sha2::Digest>::digest(&real).into();

    let client = env.client("meta");
    let mut session = client.start_upload().await.unwrap();
    let err = session
        .add_chunked_file(&path, wrong.clone(), Mapper::reading(), None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, git_xet_client::ClientError::Corrupt { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("chunk list"), "{err}");
    drop(session);
    let recon = client.api().reconstruction(&wrong.file_hash, None).await;
    assert!(recon.is_err(), "the listed file hash was not registered");
}
