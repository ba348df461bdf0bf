//! Downloads that hand their bytes over while they are written (git's streamed smudge):
//! every byte once, in order, even when the download starts over, and a start-over that
//! produces other bytes than were handed over is flagged.

use bytes::Bytes;
use git_xet_client::{ContentTap, DownloadOptions, LocalSource};

use crate::common::*;

/// Collects what passes through a tap on a thread of its own, as git's filter does.
fn drain(rx: std::sync::mpsc::Receiver<Bytes>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || rx.iter().flat_map(|b| b.to_vec()).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_a_bad_local_chunk_hands_over_only_the_rest() {
    let env = Env::new();
    let t = TwoVersions::set_up(&env, 71, 3 << 20, b"an edit early in the file").await;
    // The local copy goes bad late in the file: the first attempt hands over several MiB
    // (local chunks and the edit) before a local chunk fails its hash.
    let mut damaged = t.v1.clone();
    damaged[7 << 20] ^= 1;
    std::fs::write(&t.local_v1, &damaged).unwrap();

    let (tap, rx) = ContentTap::new(64);
    let received = drain(rx);
    let options = DownloadOptions {
        expected_sha256: Some(sha256(&t.v2)),
        sources: vec![LocalSource {
            path: t.local_v1.clone(),
            file_hash: Some(t.h1),
            sha256: None,
        }],
        tap: Some(tap.clone()),
        ..Default::default()
    };
    let out = env.path("v2-out");
    let outcome = t.puller.download(&t.h2, &out, options).await.unwrap();
    tap.close();
    let received = received.join().unwrap();
    assert!(
        received == t.v2,
        "the tap delivered {} bytes, not v2",
        received.len()
    );
    assert!(!tap.diverged());
    assert_eq!(tap.forwarded(), t.v2.len() as u64);
    assert_eq!(
        outcome.local_bytes, 0,
        "the second attempt read no local data"
    );
    assert!(std::fs::read(&out).unwrap() == t.v2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bytes_handed_over_before_a_retry_are_flagged() {
    let env = Env::new();
    let (client, hash, data) = env.cached_download(3 << 20, 72).await;
    // Cached xorb bytes are verified only with the whole file: damage the chunk data (random
    // data is stored uncompressed) so that the first attempt hands the bad bytes over.
    let mut cached = files_under(&env.path("chunks"));
    cached.retain(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 1 << 20));
    assert!(
        !cached.is_empty(),
        "the first download filled the chunk cache"
    );
    for p in &cached {
        let mut bytes = std::fs::read(p).unwrap();
        bytes[100_000] ^= 0xff;
        std::fs::write(p, bytes).unwrap();
    }

    let (tap, rx) = ContentTap::new(64);
    let received = drain(rx);
    let options = DownloadOptions {
        expected_sha256: Some(sha256(&data)),
        tap: Some(tap.clone()),
        ..Default::default()
    };
    let out = env.path("two");
    client.download(&hash, &out, options).await.unwrap();
    tap.close();
    let received = received.join().unwrap();
    assert!(
        std::fs::read(&out).unwrap() == data,
        "the retry itself succeeded"
    );
    assert!(
        tap.diverged(),
        "what was handed over is not what was verified"
    );
    assert!(received != data);

    // A range download cannot be tapped.
    let (tap, _rx) = ContentTap::new(1);
    let options = DownloadOptions {
        range: Some((0, 9)),
        tap: Some(tap),
        ..Default::default()
    };
    let err = client.download(&hash, &out, options).await.unwrap_err();
    assert!(err.to_string().contains("whole-file"), "{err}");
}
