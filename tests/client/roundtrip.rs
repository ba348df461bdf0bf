//! Round trips through the real server: sizes, compression, several xorbs, byte ranges.

use git_xet_client::DownloadOptions;
use git_xet_core::constants::{MAX_CHUNK_SIZE, MIN_CHUNK_SIZE};
use git_xet_core::MerkleHash;

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_of_assorted_sizes_round_trip() {
    let env = Env::new();
    let client = env.client("meta");
    let mut compressible = Vec::new();
    while compressible.len() < 3 << 20 {
        compressible.extend_from_slice(
            format!(
                "line {} of a very repetitive log file\n",
                compressible.len() % 977
            )
            .as_bytes(),
        );
    }
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("one-byte", vec![42]),
        ("tiny", random_bytes(100, 1)),
        ("min-chunk", random_bytes(MIN_CHUNK_SIZE, 2)),
        ("max-chunk", random_bytes(MAX_CHUNK_SIZE, 3)),
        ("max-chunk-plus-one", random_bytes(MAX_CHUNK_SIZE + 1, 4)),
        ("two-max-chunks", random_bytes(2 * MAX_CHUNK_SIZE, 5)),
        ("compressible", compressible),
    ];
    let paths: Vec<_> = cases
        .iter()
        .map(|(name, bytes)| env.file(name, bytes))
        .collect();
    let refs: Vec<&std::path::Path> = paths.iter().map(|p| p.as_path()).collect();
    let before = env.xorb_bytes_received();
    let summary = upload(&client, &refs).await;
    let sent = env.xorb_bytes_received() - before;

    assert_eq!(summary.files.len(), cases.len());
    assert_eq!(
        summary.files[0].file_hash,
        MerkleHash::ZERO,
        "the empty file hashes to zeros"
    );
    let total: usize = cases.iter().map(|c| c.1.len()).sum();
    assert_eq!(summary.stats.dedup.logical_bytes, total as u64);
    assert_eq!(sent as u64, summary.stats.xorb_bytes_sent);
    // The 3 MiB log compresses: far fewer bytes were sent than the files hold.
    assert!(
        sent < (total - (3 << 20) / 2) as f64,
        "sent {sent} of {total}"
    );

    for ((name, bytes), file) in cases.iter().zip(&summary.files) {
        assert_eq!(file.size, bytes.len() as u64);
        assert_eq!(file.sha256, sha256(bytes));
        let local = git_xet_io::pipeline::hash_stream(&bytes[..], false).unwrap();
        assert_eq!(file.file_hash, local.file_hash, "{name}");
        download(
            &client,
            &file.file_hash,
            &env.path(&format!("{name}.out")),
            bytes,
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_over_64_mib_spans_xorbs_and_ranges_cross_their_edges() {
    let env = Env::new();
    let client = env.client("meta");
    let data = random_bytes(70 << 20, 7);
    let path = env.file("big", &data);
    let summary = upload(&client, &[&path]).await;
    assert_eq!(summary.stats.xorbs_uploaded, 2);
    let hash = summary.files[0].file_hash;
    download(&client, &hash, &env.path("big.out"), &data).await;

    // The first xorb ends where the first term ends.
    let recon = client.api().reconstruction(&hash, None).await.unwrap();
    assert_eq!(recon.terms.len(), 2);
    let edge = u64::from(recon.terms[0].unpacked_length);
    let out = env.path("range.out");
    for (s, e) in [
        (edge - 1, edge),
        (edge - 100, edge + 99),
        (edge, edge),
        (edge - 1, edge - 1),
        (0, edge - 1),
        (edge, data.len() as u64 - 1),
    ] {
        let got = download_range(&client, &hash, &out, s, e).await;
        assert!(got == data[s as usize..=e as usize], "range {s}-{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranges_at_chunk_edges_return_exactly_the_bytes_asked() {
    let env = Env::new();
    let client = env.client("meta");
    let data = random_bytes(1 << 20, 11);
    let path = env.file("f", &data);
    let hash = upload(&client, &[&path]).await.files[0].file_hash;
    let ends: Vec<u64> = chunks_of(&data)
        .iter()
        .scan(0u64, |at, c| {
            *at += c.1 as u64;
            Some(*at)
        })
        .collect();
    let (c0, c1) = (ends[0], ends[1]);
    let last = data.len() as u64 - 1;
    let out = env.path("out");
    for (s, e) in [
        (0, 0),
        (0, c0 - 1),
        (c0 - 1, c0),
        (c0, c1 - 1),
        (c0 + 1, c1 + 1),
        (last, last),
        (0, last),
        (5, last),
    ] {
        let got = download_range(&client, &hash, &out, s, e).await;
        assert!(
            got == data[s as usize..=e as usize],
            "range {s}-{e}: got {} bytes",
            got.len()
        );
    }
    // Past the end: the output stops at the end of the file.
    let got = download_range(&client, &hash, &out, last - 9, last + 1000).await;
    assert!(got == data[last as usize - 9..], "got {} bytes", got.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_file_fails_with_the_servers_reason_and_leaves_nothing() {
    let env = Env::new();
    let client = env.client("meta");
    let out = env.path("missing.out");
    let unknown = git_xet_core::hash::chunk_hash(b"no such file");
    let err = client
        .download(&unknown, &out, DownloadOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(404), "{err}");
    assert!(!out.exists());
    assert!(files_under(env.dir.path())
        .iter()
        .all(|p| !p.to_string_lossy().ends_with(".partial")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_that_are_not_files_upload_through_staging() {
    let env = Env::new();
    let client = env.client("meta");
    let mut text = Vec::new();
    while text.len() < 3 << 20 {
        text.extend_from_slice(format!("{{\"row\": {}}}\n", text.len()).as_bytes());
    }
    let random = random_bytes(3 << 20, 17);
    let mut session = client.start_upload().await.unwrap();
    let a = session
        .add_reader("text", std::io::Cursor::new(text.clone()), 0, None)
        .await
        .unwrap();
    let b = session
        .add_reader("random", std::io::Cursor::new(random.clone()), 0, None)
        .await
        .unwrap();
    let summary = session.finish().await.unwrap();
    assert_eq!(summary.files.len(), 2);
    download(&client, &a.file_hash, &env.path("a"), &text).await;
    download(&client, &b.file_hash, &env.path("b"), &random).await;
    // Staging files are gone.
    assert!(files_under(&env.path("meta/staging")).is_empty());
}
