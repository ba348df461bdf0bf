//! Failures: a flaky server, corrupt stored data, expiring tokens, wrong tokens.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use git_xet_client::{CasClient, ClientError, DownloadOptions, RefreshFn, Token};

use crate::common::*;
use crate::proxy::{Fault, FaultProxy};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_ride_out_500s_and_dropped_connections() {
    let proxy = FaultProxy::start();
    // Without --public-url the server builds fetch_info URLs from the Host header, so they
    // point at the proxy too.
    let server = TestServer::start();
    proxy.set_upstream(&server.url);
    let dir = tempfile::tempdir().unwrap();
    let token = server.token(REPO, "write");
    let client = CasClient::new(config_for(&proxy.url, &token, &dir.path().join("meta"))).unwrap();

    let data = random_bytes(3 << 20, 61);
    let path = dir.path().join("f");
    write_file(&path, &data);
    proxy.inject([Fault::Status500, Fault::Drop, Fault::Status500, Fault::Drop]);
    let summary = upload(&client, &[&path]).await;
    assert_eq!(proxy.faults_left(), 0);

    // Downloads, on fresh connections: errors before the body, and a connection cut after
    // 300 kB, in the middle of the xorb data (the reconstruction answer is much smaller).
    let client = CasClient::new(config_for(&proxy.url, &token, &dir.path().join("meta2"))).unwrap();
    proxy.inject([
        Fault::Status500,
        Fault::Drop,
        Fault::Truncate(300_000),
        Fault::Status500,
    ]);
    let out = dir.path().join("out");
    let options = DownloadOptions {
        expected_sha256: Some(sha256(&data)),
        ..Default::default()
    };
    let outcome = client
        .download(&summary.files[0].file_hash, &out, options)
        .await
        .unwrap();
    assert!(std::fs::read(&out).unwrap() == data);
    assert_eq!(proxy.faults_left(), 0);
    // The cut range was fetched again: more bytes crossed the network than the xorb holds.
    assert!(outcome.network_bytes > data.len() as u64, "{outcome:?}");
    assert!(proxy.counters.faults.load(Ordering::SeqCst) == 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stays_down_fails_in_bounded_time() {
    let proxy = FaultProxy::start();
    let server = TestServer::start();
    proxy.set_upstream(&server.url);
    let dir = tempfile::tempdir().unwrap();
    let mut config = config_for(
        &proxy.url,
        &server.token(REPO, "read"),
        &dir.path().join("meta"),
    );
    config.retry.max_attempts = 3;
    let client = CasClient::new(config).unwrap();
    proxy.inject([Fault::Status500; 10]);
    let hash = git_xet_core::hash::chunk_hash(b"x");
    let err = client
        .download(&hash, &dir.path().join("out"), DownloadOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClientError::RetriesExhausted { attempts: 3, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("injected fault"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_fetch_urls_are_renewed() {
    let proxy = FaultProxy::start();
    let server = TestServer::start_with(&["--fetch-url-ttl", "1"]);
    proxy.set_upstream(&server.url);
    let dir = tempfile::tempdir().unwrap();
    let token = server.token(REPO, "write");
    let data = random_bytes(1 << 20, 65);
    let path = dir.path().join("f");
    write_file(&path, &data);
    let uploader = CasClient::new(config_for(&server.url, &token, &dir.path().join("m1"))).unwrap();
    let hash = upload(&uploader, &[&path]).await.files[0].file_hash;

    // The reconstruction answer arrives 2.5 s late: its 1 s fetch URLs have expired.
    let client = CasClient::new(config_for(&proxy.url, &token, &dir.path().join("m2"))).unwrap();
    proxy.inject([Fault::Delay(2500)]);
    let out = dir.path().join("out");
    download(&client, &hash, &out, &data).await;
    assert_eq!(proxy.faults_left(), 0);
}

/// The stored xorb files of a server.
fn stored_xorbs(server: &TestServer) -> Vec<std::path::PathBuf> {
    files_under(&server.data)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "xorb"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_stored_xorb_fails_the_download_and_leaves_no_output() {
    let env = Env::new();
    let client = env.client("meta");
    let data = random_bytes(1 << 20, 71);
    let path = env.file("f", &data);
    let hash = upload(&client, &[&path]).await.files[0].file_hash;
    let xorbs = stored_xorbs(&env.server);
    assert_eq!(xorbs.len(), 1, "{xorbs:?}");

    // Flip one byte of chunk data (random data is stored uncompressed: only hashes notice).
    let mut bytes = std::fs::read(&xorbs[0]).unwrap();
    bytes[1000] ^= 0xff;
    std::fs::write(&xorbs[0], &bytes).unwrap();
    let out = env.path("out");
    let err = client
        .download(&hash, &out, DownloadOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Corrupt { .. }), "{err}");
    assert!(!out.exists(), "no output file");
    let leftovers: Vec<_> = files_under(env.dir.path())
        .into_iter()
        .filter(|p| p.to_string_lossy().contains(".partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // A broken chunk header is caught even in a range download.
    bytes[1000] ^= 0xff;
    bytes[4] = 9; // compression type of the first chunk
    std::fs::write(&xorbs[0], &bytes).unwrap();
    let options = DownloadOptions {
        range: Some((0, 99)),
        ..Default::default()
    };
    let err = client.download(&hash, &out, options).await.unwrap_err();
    assert!(matches!(err, ClientError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("compression"), "{err}");
    assert!(!out.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_token_is_refreshed_before_use_and_after_a_401() {
    let env = Env::new();
    // Signed by the server, expired the second it was made: no waiting for it.
    let expired = env.server.expired_token(REPO, "write");
    let refreshes = Arc::new(AtomicU32::new(0));
    let make_refresh = || -> RefreshFn {
        let count = refreshes.clone();
        let data = env.server.data.clone();
        Arc::new(move || {
            let count = count.clone();
            let data = data.clone();
            Box::pin(async move {
                count.fetch_add(1, Ordering::SeqCst);
                let out = std::process::Command::new(crate::support::git_xet_bin())
                    .args([
                        "server", "token", "create", "--repo", REPO, "--scope", "write", "--ttl",
                        "3600", "--data",
                    ])
                    .arg(&data)
                    .output()
                    .map_err(|e| ClientError::Auth(e.to_string()))?;
                let secret = String::from_utf8(out.stdout).unwrap().trim().to_string();
                Ok(Token::new(
                    secret,
                    Some(SystemTime::now() + Duration::from_secs(3600)),
                ))
            })
        })
    };
    let data = random_bytes(300_000, 81);
    let path = env.file("f", &data);

    // Expiry known: refreshed before the first request.
    let mut config = env.config("meta");
    config.token = Some(Token::new(
        &expired,
        Some(SystemTime::now() - Duration::from_secs(1)),
    ));
    config.refresh = Some(make_refresh());
    let client = CasClient::new(config).unwrap();
    let hash = upload(&client, &[&path]).await.files[0].file_hash;
    assert_eq!(refreshes.load(Ordering::SeqCst), 1);

    // Expiry unknown: the server's 401 triggers one refresh, then everything works.
    let mut config = env.config("meta2");
    config.token = Some(Token::new(&expired, None));
    config.refresh = Some(make_refresh());
    let client = CasClient::new(config).unwrap();
    download(&client, &hash, &env.path("out"), &data).await;
    assert_eq!(refreshes.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tokens_fail_at_once_with_a_clear_reason() {
    let env = Env::new();
    let data = random_bytes(100_000, 91);
    let path = env.file("f", &data);

    let mut config = env.config("meta");
    config.token = Some(Token::new("not-a-token", None));
    let client = CasClient::new(config).unwrap();
    let mut session = client.start_upload().await.unwrap();
    session.add_file(&path, None).await.unwrap();
    let started = std::time::Instant::now();
    let err = session.finish().await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "no retries on 401"
    );
    assert!(
        matches!(
            err,
            ClientError::Http { status: 401, .. } | ClientError::Auth(_)
        ),
        "{err}"
    );

    // A read token cannot upload.
    let mut config = env.config("meta2");
    config.token = Some(Token::new(env.server.token(REPO, "read"), None));
    let client = CasClient::new(config).unwrap();
    let mut session = client.start_upload().await.unwrap();
    session.add_file(&path, None).await.unwrap();
    let err = session.finish().await.unwrap_err();
    assert_eq!(err.status(), Some(403), "{err}");
    assert_eq!(env.xorb_bytes_received(), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_changed_before_its_xorb_is_sent_fails_cleanly() {
    let env = Env::new();
    let client = env.client("meta");
    let data = random_bytes(2 << 20, 95);
    let path = env.file("f", &data);
    let mut session = client.start_upload().await.unwrap();
    let added = session.add_file(&path, None).await.unwrap();
    // Raw chunks are read again from the file when the xorb is sent, at `finish` here.
    let mut changed = data.clone();
    changed[1 << 20] ^= 1;
    std::fs::write(&path, &changed).unwrap();
    let err = session.finish().await.unwrap_err();
    assert_eq!(err.status(), Some(400), "{err}");
    assert!(err.to_string().contains("did a file change"), "{err}");
    // Nothing was registered, and the local caches learned nothing false.
    let out = env.path("out");
    let err = client
        .download(&added.file_hash, &out, DownloadOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(404), "{err}");
    assert!(files_under(&env.path("meta/shards")).is_empty());
}

/// An upload's answer that is not the CAS API's JSON (a proxy's page with status 200) fails
/// the upload with the status and what came, instead of being taken for "stored".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_answer_that_is_not_the_apis_fails_the_upload() {
    let proxy = FaultProxy::start();
    let server = TestServer::start();
    proxy.set_upstream(&server.url);
    let dir = tempfile::tempdir().unwrap();
    let token = server.token(REPO, "write");
    let mut config = config_for(&proxy.url, &token, &dir.path().join("meta"));
    // No dedup queries: the first connection is the xorb upload.
    config.global_dedup = false;
    let client = CasClient::new(config).unwrap();
    let path = dir.path().join("f");
    write_file(&path, &random_bytes(200_000, 62));
    proxy.inject([Fault::Replace(
        "<html><body>Service maintenance</body></html>",
    )]);
    let result = async {
        let mut session = client.start_upload().await?;
        session.add_file(&path, None).await?;
        session.finish().await
    }
    .await;
    let err = result.unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(&err, ClientError::MalformedAnswer { status: 200, excerpt, .. }
            if excerpt.starts_with("<html><body>Service maintenance")),
        "{err:?}"
    );
    assert!(
        text.contains("uploading xorb") && text.contains("200"),
        "{text}"
    );
    assert_eq!(proxy.faults_left(), 0);
}
