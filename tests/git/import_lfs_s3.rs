//! `git xet server import-lfs --from s3://BUCKET/PREFIX` against a real Garage cluster: an
//! LFS store uploaded to the bucket (git-lfs's `aa/bb/<oid>` layout and giftless's
//! `<org>/<repo>/<oid>` side by side, one object whose bytes do not match its name, one key
//! that is no object) is imported straight from the bucket; every good object then
//! downloads bit-exact from the server, the bad one is reported and absent, and a re-run
//! converts nothing; into a deployment whose objects are on a directory or on S3.

use crate::env::{stderr, stdout};
use crate::support::garage;
use crate::support::{git_xet, TestServer};

/// Bytes no chunk of which repeats (xorshift), so dedup cannot hide a wrong byte.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn an_lfs_store_in_a_bucket_imports_and_downloads_bit_exact() {
    import_from_bucket(false);
}

/// The same into a deployment whose own objects are on S3 (`--object-store`, as the server).
#[test]
fn an_lfs_store_in_a_bucket_imports_into_a_deployment_on_s3() {
    import_from_bucket(true);
}

fn import_from_bucket(store_on_s3: bool) {
    let Some(garage) = garage::shared() else {
        return;
    };
    let prefix = garage::unique_prefix("lfs-store");
    let big = noise(9 * 1024 * 1024 + 12345, 1);
    // An edited copy of `big`: most of its chunks deduplicate.
    let mut edited = big.clone();
    edited[4 * 1024 * 1024..4 * 1024 * 1024 + 100].fill(7);
    let small = b"a small LFS object\n".repeat(50);
    let good = [big, edited, small];
    let oids: Vec<String> = good.iter().map(|b| sha256_hex(b)).collect();
    let bad_oid = "cd".repeat(32);
    let mut uploads: Vec<(String, Vec<u8>)> = vec![
        (
            format!("{prefix}/{}/{}/{}", &oids[0][..2], &oids[0][2..4], oids[0]),
            good[0].clone(),
        ),
        (
            format!("{prefix}/{}/{}/{}", &oids[1][..2], &oids[1][2..4], oids[1]),
            good[1].clone(),
        ),
        (format!("{prefix}/team/x/{}", oids[2]), good[2].clone()),
        (
            format!("{prefix}/cd/cd/{bad_oid}"),
            b"not what the name says".to_vec(),
        ),
        (format!("{prefix}/README"), b"not an object".to_vec()),
    ];
    // Outside the prefix: must not be read.
    uploads.push((
        format!("{prefix}-other/{}", "ef".repeat(32)),
        b"another store".to_vec(),
    ));
    let s3 = garage.s3_builder().build().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use object_store::ObjectStore as _;
        for (key, bytes) in &uploads {
            s3.put(
                &object_store::path::Path::from(key.as_str()),
                bytes.clone().into(),
            )
            .await
            .unwrap();
        }
    });

    let store_prefix = garage::unique_prefix("import-into");
    let server = if store_on_s3 {
        TestServer::start_on_garage(garage, &store_prefix, &[])
    } else {
        TestServer::start_with(&[])
    };
    let from = format!("s3://{}/{prefix}", garage.bucket);
    let import = || {
        let mut cmd = git_xet();
        cmd.args(["server", "import-lfs", "--repo", "org/x", "--from", &from])
            .arg("--data")
            .arg(&server.data);
        // The server's own store (also when GIT_XET_TEST_OBJECT_STORE=garage chose it).
        if let Some(url) = server.s3_store_url() {
            cmd.arg("--object-store").arg(url);
        }
        garage.apply_env(&mut cmd).output().unwrap()
    };

    let out = import();
    let (report, err) = (stdout(&out), stderr(&out));
    assert!(!out.status.success(), "{report}\n{err}");
    assert!(
        report.contains("objects:        4 (3 converted now, 0 already in org/x)"),
        "{report}\n{err}"
    );
    let logical: usize = good.iter().map(Vec::len).sum::<usize>() + 22;
    assert!(
        report.contains(&format!("logical bytes:  {logical} ")),
        "{report}"
    );
    assert!(
        err.contains(&format!(
            "not imported: s3://{}/{prefix}/cd/cd/{bad_oid} holds bytes hashing to {}",
            garage.bucket,
            sha256_hex(b"not what the name says")
        )) && err.contains("1 objects do not match their names"),
        "{err}"
    );
    assert!(err.contains("1 files not named by a sha256"), "{err}");

    // Every good object downloads bit-exact; the bad one is not there.
    let token = server.token("org/x", "read");
    let dir = tempfile::tempdir().unwrap();
    let download = |oid: &str| {
        let file = dir.path().join(oid);
        let code = std::process::Command::new("curl")
            .args(["-s", "-o"])
            .arg(&file)
            .args(["-w", "%{http_code}", "-u"])
            .arg(format!("x:{token}"))
            .arg(format!(
                "http://{}/org/x.git/info/lfs/objects/{oid}",
                server.addr()
            ))
            .output()
            .unwrap();
        (String::from_utf8_lossy(&code.stdout).into_owned(), file)
    };
    for (oid, bytes) in oids.iter().zip(&good) {
        let (code, file) = download(oid);
        assert_eq!(code, "200", "{oid}");
        assert!(std::fs::read(file).unwrap() == *bytes, "{oid} differs");
    }
    assert_eq!(download(&bad_oid).0, "404");
    // The xorbs went where the deployment keeps them.
    assert!(server.stores_on_s3() || !store_on_s3);
    assert!(server.stored_count("xorbs") > 0);

    // A re-run converts nothing new (the bad object is read and refused again).
    let out = import();
    let report = stdout(&out);
    assert!(
        report.contains("objects:        4 (0 converted now, 3 already in org/x)"),
        "{report}\n{}",
        stderr(&out)
    );
    assert!(report.contains("bytes stored:   0 "), "{report}");
}

#[test]
fn a_bucket_that_cannot_be_read_is_a_clear_error() {
    let Some(garage) = garage::shared() else {
        return;
    };
    let server = TestServer::start();
    let mut cmd = git_xet();
    cmd.args(["server", "import-lfs", "--repo", "org/y", "--from"])
        .arg(format!("s3://{}/p", garage.bucket))
        .arg("--data")
        .arg(&server.data);
    garage.apply_env(&mut cmd);
    cmd.env("AWS_SECRET_ACCESS_KEY", "wrong");
    let out = cmd.output().unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "reading the object store s3://{}/p",
            garage.bucket
        )),
        "{err}"
    );
    assert!(!stdout(&out).contains("objects:"), "{}", stdout(&out));
}
