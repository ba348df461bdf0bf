//! hf-xet 1.8 on a server with `--dedup-scope repo`: the same file uploaded into two
//! repositories of different orgs by one user with one hf-xet cache, each through the CAS
//! URL the server hands out for its repository (as Hugging Face's git-xet agent and
//! huggingface_hub take it from the xet token route). hf-xet keys its dedup cache by that
//! URL, so the second upload does not reuse the first one's xorbs from its cache (the server
//! would refuse a shard referencing them): both uploads succeed, the second sends the
//! content again, and both repositories download it bit-exact.

use crate::common::*;

/// The `casUrl` the server's xet-write-token route answers for `repo`.
fn cas_url(env: &Env, repo: &str) -> String {
    let answer: serde_json::Value = reqwest::blocking::Client::new()
        .get(format!(
            "{}/{repo}.git/info/lfs/xet-write-token",
            env.server.url
        ))
        .bearer_auth(env.server.token(repo, "write"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    answer["casUrl"].as_str().unwrap().to_string()
}

#[test]
fn hf_xet_uploads_one_file_into_two_scopes() {
    let Some(env) = Env::with_server(TestServer::start_with(&["--dedup-scope", "repo"])) else {
        return;
    };
    let data = random_bytes(3_000_000, 40);
    let path = env.file("model.bin", &data);
    let (url_a, url_b) = (cas_url(&env, "org1/a"), cas_url(&env, "org2/b"));
    assert_ne!(url_a, url_b, "one CAS URL per scope");
    let first = env.hf_upload_at("org1/a", &url_a, &[path.as_path()]);
    let received_first = env.xorb_bytes_received();
    assert!(received_first > 2_000_000.0, "{received_first}");
    let second = env.hf_upload_at("org2/b", &url_b, &[path.as_path()]);
    assert_eq!(first[0].hash, second[0].hash);
    // The second scope sees none of the first's xorbs: the whole content was sent again.
    let received_second = env.xorb_bytes_received() - received_first;
    assert!(received_second > 2_000_000.0, "{received_second}");
    for (repo, url, name) in [("org1/a", &url_a, "a.bin"), ("org2/b", &url_b, "b.bin")] {
        let got = env.hf_download_at(repo, url, &first[0].hash, data.len() as u64, name);
        assert!(got == data, "{repo}: hf-xet read different bytes");
    }
}
