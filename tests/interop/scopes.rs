//! hf-xet 1.8 on a server with `--dedup-scope repo`: the same file uploaded into two
//! repositories of different orgs, by one user with one hf-xet cache (the case where the
//! client's own dedup remembers the first upload's xorbs), succeeds in both and downloads
//! bit-exact from both; the second repository's upload stored its own copy of the content's
//! xorbs in its scope.

use crate::common::*;

#[test]
fn hf_xet_uploads_one_file_into_two_scopes() {
    let Some(env) = Env::with_server(TestServer::start_with(&["--dedup-scope", "repo"])) else {
        return;
    };
    let data = random_bytes(3_000_000, 40);
    let path = env.file("model.bin", &data);
    let first = env.hf_upload_to("org1/a", &[path.as_path()]);
    let received_first = env.xorb_bytes_received();
    assert!(received_first > 2_000_000.0, "{received_first}");
    let second = env.hf_upload_to("org2/b", &[path.as_path()]);
    assert_eq!(first[0].hash, second[0].hash);
    // The second scope sees none of the first's xorbs, so the whole content was uploaded
    // again (hf-xet was told they were not stored).
    let received_second = env.xorb_bytes_received() - received_first;
    assert!(received_second > 2_000_000.0, "{received_second}");
    for (repo, name) in [("org1/a", "a.bin"), ("org2/b", "b.bin")] {
        let got = env.hf_download_from(repo, &first[0].hash, data.len() as u64, name);
        assert!(got == data, "{repo}: hf-xet read different bytes");
    }
}
