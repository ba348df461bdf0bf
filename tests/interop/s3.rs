//! hf-xet against a server on Garage with `--presign`: the reference client fetches xorb
//! bytes straight from the object store with the presigned URLs, bit-exact.

use git_xet_core::MerkleHash;

use crate::common::{our_download, xet_hash, Env, TestServer};
use crate::support::garage;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hf_xet_downloads_from_garage_with_presigned_urls() {
    let Some(garage) = garage::shared() else {
        return;
    };
    let prefix = garage::unique_prefix("hf");
    let server = TestServer::start_on_garage(garage, &prefix, &["--presign"]);
    let Some(env) = Env::with_server(server) else {
        return;
    };
    let data = crate::common::text(3_000_000);
    let path = env.file("model.txt", &data);
    let uploaded = env.hf_upload(&[&path]);
    assert_eq!(uploaded[0].hash, xet_hash(&data).to_hex());
    let served = env.server.metric("git_xet_xorb_bytes_served_total");
    let theirs = env.hf_download(&uploaded[0].hash, data.len() as u64, "model.hf");
    assert!(theirs == data, "hf-xet read different bytes");
    let range = env.hf_range(&uploaded[0].hash, data.len() as u64, 70_000, 1_900_000);
    assert!(range == data[70_000..1_900_000], "hf-xet range");
    let ours = env.ours("meta", "read");
    let hash = MerkleHash::from_hex(&uploaded[0].hash).unwrap();
    let mine = our_download(&ours, &hash, &env.path("model.ours"), None).await;
    assert!(mine == data, "our client read different bytes");
    // Every byte came from Garage, none through the server.
    assert_eq!(env.server.metric("git_xet_xorb_bytes_served_total"), served);
    assert_eq!(served, 0.0);
}
