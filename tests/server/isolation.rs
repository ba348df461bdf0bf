//! Multi-tenant isolation: global dedup stores a chunk once, so one xorb holds several
//! repositories' files; what a repository's token is handed (fetch URLs, answers by content
//! hash) must give it nothing its repository does not already hold, and a revoked token must
//! be refused on every route, the fetch URLs it was handed included.

use std::time::{Duration, Instant};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use reqwest::blocking::Response;

use crate::common::*;
use crate::lfs::{basic_upload, lfs_url};
use crate::support::{git_xet, TestServer};

/// GET `url` with an optional `Range`.
fn fetch(url: &str, range: Option<&str>) -> Response {
    let mut req = client().get(url);
    if let Some(r) = range {
        req = req.header("Range", r);
    }
    req.send().unwrap()
}

/// The id a token carries (what `token revoke` takes).
pub(crate) fn token_id(token: &str) -> String {
    let payload = token.split('.').nth(1).unwrap();
    let claims: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
    claims["id"].as_str().unwrap().to_string()
}

pub(crate) fn revoke(server: &TestServer, id: &str) {
    let out = git_xet()
        .args(["server", "token", "revoke", id, "--data"])
        .arg(&server.data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Polls `refused` for up to 7 s (the revocation cache remembers answers for 5 s).
pub(crate) fn refused_within_the_cache_ttl(mut refused: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !refused() {
        assert!(
            start.elapsed() < Duration::from_secs(7),
            "still accepted {:?} after the revocation",
            start.elapsed()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    start.elapsed()
}

/// org/b's file F sits in one xorb; a writer of org/a knows F's first 500 kB.
struct Attack {
    server: TestServer,
    f: Upload,
    /// The prefix as org/a uploaded it, by basic PUT.
    prefix: Upload,
    a: Cas,
}

fn attack() -> Attack {
    let server = TestServer::start();
    let b = Cas::new(&server, "org/b", "write");
    let f = Upload::random(2_000_000, 301, 8192);
    assert_eq!(f.xorbs.len(), 1, "F is one xorb");
    b.upload(&f);
    let a_token = server.token("org/a", "write");
    let prefix = Upload::new(f.data[..500_000].to_vec(), 8192);
    basic_upload(&server, "org/a", &a_token, &prefix.data);
    let a = Cas::with_token(&server, &a_token);
    Attack {
        server,
        f,
        prefix,
        a,
    }
}

#[test]
fn a_writer_cannot_widen_a_fetch_url_into_another_repositorys_file() {
    let Attack {
        server,
        f,
        prefix,
        a,
    } = attack();
    let xorb = &f.xorbs[0];
    let total = xorb.bytes.len() as u64;
    let rec = a.reconstruction(&prefix.file_hash, None);
    let infos = rec
        .fetch_info
        .get(&xorb.hash)
        .expect("the prefix was deduplicated against F's xorb");
    assert_eq!(infos.len(), 1);
    let (url, granted) = (&infos[0].url, infos[0].url_range);
    assert!(
        granted.start == 0 && granted.end + 1 < total / 2,
        "{granted:?}"
    );

    // What the reconstruction authorized is served, and any part of it.
    let r = fetch(url, Some(&granted.header_value()));
    assert_eq!(r.status(), 206);
    assert_eq!(
        r.bytes().unwrap(),
        xorb.bytes[granted.start as usize..=granted.end as usize]
    );
    let inside = format!("bytes={}-{}", granted.start + 10, granted.end - 10);
    let r = fetch(url, Some(&inside));
    assert_eq!(r.status(), 206);
    assert_eq!(
        r.bytes().unwrap(),
        xorb.bytes[granted.start as usize + 10..=granted.end as usize - 10]
    );
    assert_eq!(a.download(&prefix.file_hash, None), prefix.data);

    // Nothing else of the xorb: not without a Range, not wider, not another part of it.
    let (s, e) = (granted.start, granted.end);
    let refused = [
        None,
        Some(format!("bytes=0-{}", total - 1)),
        Some(format!("bytes={s}-")),
        Some(format!("bytes={s}-{}", e + 1)),
        Some(format!("bytes={}-{}", e + 1, total - 1)),
        Some(format!("bytes={}-{}", total / 2, total / 2 + 1000)),
        Some("bytes=-1000".to_string()),
        Some(format!("bytes={s}-{e},{}-{}", e + 1, total - 1)),
    ];
    for range in refused {
        let r = fetch(url, range.as_deref());
        let status = r.status().as_u16();
        let body = r.bytes().unwrap();
        let shown = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
        assert_eq!(
            status,
            403,
            "{range:?} was served ({} bytes): {shown}",
            body.len()
        );
        assert!(
            shown.contains(&format!("grants bytes {s}-{e}")),
            "{range:?}: {shown}"
        );
    }
    // The v2 answer (hf-xet's) grants the same, one URL per range.
    let v2: serde_json::Value = a
        .http
        .get(format!(
            "{}/v2/reconstructions/{}",
            server.url, prefix.file_hash
        ))
        .bearer_auth(&a.token)
        .send()
        .unwrap()
        .json()
        .unwrap();
    for fetches in v2["xorbs"].as_object().unwrap().values() {
        for entry in fetches.as_array().unwrap() {
            assert_eq!(entry["ranges"].as_array().unwrap().len(), 1);
            let url = entry["url"].as_str().unwrap();
            assert_eq!(fetch(url, None).status(), 403);
            let bytes = &entry["ranges"][0]["bytes"];
            let (s, e) = (
                bytes["start"].as_u64().unwrap(),
                bytes["end"].as_u64().unwrap(),
            );
            assert_eq!(fetch(url, Some(&format!("bytes={s}-{e}"))).status(), 206);
            assert_eq!(
                fetch(url, Some(&format!("bytes={s}-{}", e + 1))).status(),
                403
            );
        }
    }
}

#[test]
fn a_tampered_fetch_url_is_refused() {
    let Attack {
        server: _server,
        f,
        prefix,
        a,
    } = attack();
    let xorb = &f.xorbs[0];
    let total = xorb.bytes.len();
    let rec = a.reconstruction(&prefix.file_hash, None);
    let info = &rec.fetch_info[&xorb.hash][0];
    let (base, query) = info.url.split_once('?').unwrap();
    let param = |name: &str| {
        query
            .split('&')
            .find_map(|p| p.strip_prefix(&format!("{name}=")))
            .unwrap()
            .to_string()
    };
    let (bytes, tid, expires, sig) = (param("bytes"), param("tid"), param("expires"), param("sig"));
    assert_eq!(
        bytes,
        format!("{}-{}", info.url_range.start, info.url_range.end)
    );
    let whole = format!("bytes=0-{}", total - 1);
    let tampered = [
        format!(
            "{base}?bytes=0-{}&tid={tid}&expires={expires}&sig={sig}",
            total - 1
        ),
        format!("{base}?bytes={bytes}&tid=0000000000000000&expires={expires}&sig={sig}"),
        format!("{base}?bytes={bytes}&expires={expires}&sig={sig}"),
        format!("{base}?tid={tid}&expires={expires}&sig={sig}"),
        format!(
            "{base}?bytes={bytes}&tid={tid}&expires={}&sig={sig}",
            expires.parse::<u64>().unwrap() + 3600
        ),
        format!("{base}?expires={expires}&sig={sig}"),
    ];
    for url in tampered {
        let (status, v) = json(fetch(&url, Some(&whole)));
        assert_eq!(status, 403, "{url}: {v}");
        assert!(reason(&v).contains("xorb data URL"), "{url}: {v}");
    }
}

#[test]
fn other_repositories_tokens_get_nothing_by_content_hash() {
    let Attack {
        server,
        f,
        prefix,
        a: _writer,
    } = attack();
    // A reader of org/a: F is org/b's file.
    let a = Cas::new(&server, "org/a", "read");
    let h = f.file_hash.to_hex();
    assert_eq!(a.reconstruction_raw(&h, None).status(), 404);
    let v2 = a
        .http
        .get(format!("{}/v2/reconstructions/{h}", server.url))
        .bearer_auth(&a.token)
        .send()
        .unwrap();
    assert_eq!(v2.status(), 404);
    // The batch query answers org/a's own file and leaves F out, as if it did not exist.
    let p = prefix.file_hash.to_hex();
    let batch = a
        .http
        .get(format!(
            "{}/v1/reconstructions?file_id={h}&file_id={p}",
            server.url
        ))
        .bearer_auth(&a.token)
        .send()
        .unwrap();
    assert_eq!(batch.status(), 200);
    let batch: git_xet_core::reconstruction::BatchReconstruction = batch.json().unwrap();
    assert_eq!(
        batch.files.keys().collect::<Vec<_>>(),
        vec![&prefix.file_hash],
        "only org/a's file"
    );
    assert!(batch.file(&f.file_hash).is_none());
    let own = batch.file(&prefix.file_hash).unwrap();
    let single = a.reconstruction(&prefix.file_hash, None);
    assert_eq!(own.terms, single.terms);
    // The prefix shares F's xorb: the batch grants the prefix's bytes of it, as the single
    // query does, never F's rest.
    use git_xet_core::reconstruction::FetchInfo;
    let ranges = |infos: &std::collections::HashMap<git_xet_core::MerkleHash, Vec<FetchInfo>>| {
        let mut r: Vec<_> = infos
            .iter()
            .flat_map(|(x, i)| i.iter().map(move |i| (*x, i.range, i.url_range)))
            .collect();
        r.sort_by_key(|(x, c, _)| (x.to_hex(), c.start));
        r
    };
    assert_eq!(ranges(&batch.fetch_info), ranges(&single.fetch_info));
    // Basic downloads by oid: F's sha256 is not in org/a; org/b's path wants org/b's token.
    let oid = sha256_hex(&f.data);
    let get = |repo: &str| {
        client()
            .get(lfs_url(&server, repo, &format!("objects/{oid}")))
            .bearer_auth(&a.token)
            .send()
            .unwrap()
            .status()
    };
    assert_eq!(get("org/a"), 404);
    assert_eq!(get("org/b"), 404);
    // Its own prefix is what org/a reads.
    assert_eq!(a.download(&prefix.file_hash, None), prefix.data);
}

#[test]
fn fetch_urls_end_when_their_token_is_revoked() {
    let Attack {
        server,
        prefix,
        a,
        f: _,
    } = attack();
    let rec = a.reconstruction(&prefix.file_hash, None);
    let info = rec.fetch_info.values().next().unwrap()[0].clone();
    let range = info.url_range.header_value();
    assert_eq!(fetch(&info.url, Some(&range)).status(), 206);
    assert!(info.url.contains(&format!("tid={}", token_id(&a.token))));
    revoke(&server, &token_id(&a.token));
    let took = refused_within_the_cache_ttl(|| {
        let r = fetch(&info.url, Some(&range));
        let refused = r.status() == 403;
        if refused {
            let text = r.text().unwrap();
            assert!(text.contains("was revoked"), "{text}");
        }
        refused
    });
    eprintln!("a fetch URL of a revoked token was refused after {took:?}");
}

/// Every route that takes a token, with a revoked one: 403 naming the revocation. `/health`, `/readyz`,
/// `/metrics` and `/v1/telemetry` read no token (they serve nothing of a repository); the
/// xorb data route is bound to the token that got the URL (the test above).
#[test]
fn a_revoked_token_is_refused_on_every_route() {
    let server = TestServer::start();
    let token = crate::tokens::user_token(&server, "org/a", "admin", "alice");
    // The repository exists (git routes), with a file (CAS routes).
    let cas = Cas::with_token(&server, &token);
    let up = Upload::random(100_000, 302, 1000);
    cas.upload(&up);
    let r = client()
        .get(format!(
            "{}/org/a.git/info/refs?service=git-upload-pack",
            server.url
        ))
        .bearer_auth(&token)
        .send()
        .unwrap();
    assert!(
        r.status().is_success() || r.status() == 404,
        "{}",
        r.status()
    );
    let (h, x) = (up.file_hash.to_hex(), up.xorbs[0].hash.to_hex());
    let oid = sha256_hex(&up.data);
    let lfs = "/org/a.git/info/lfs";
    let routes: Vec<(&str, String, &str)> = vec![
        ("GET", "/".into(), ""),
        ("GET", "/org/a".into(), "text/html"),
        ("GET", format!("/v1/reconstructions/{h}"), ""),
        ("GET", format!("/api/v1/reconstructions/{h}"), ""),
        ("GET", format!("/v2/reconstructions/{h}"), ""),
        ("GET", format!("/api/v2/reconstructions/{h}"), ""),
        ("GET", format!("/v1/reconstructions?file_id={h}"), ""),
        ("GET", format!("/v1/chunks/default/{x}"), ""),
        ("POST", format!("/v1/xorbs/default/{x}"), ""),
        ("POST", format!("/v1/xorb-grants/default/{x}"), ""),
        ("POST", "/v1/shards".into(), ""),
        ("POST", "/v2/shards".into(), ""),
        ("GET", format!("/v1/upload-batches/{h}"), ""),
        (
            "GET",
            "/org/a.git/info/refs?service=git-upload-pack".into(),
            "",
        ),
        (
            "GET",
            "/org/a.git/info/refs?service=git-receive-pack".into(),
            "",
        ),
        ("POST", "/org/a.git/git-upload-pack".into(), ""),
        ("POST", "/org/a.git/git-receive-pack".into(), ""),
        ("POST", "/org/a.git/info/xet/missing-objects".into(), ""),
        ("POST", "/org/a.git/info/xet/locked-paths".into(), ""),
        ("POST", format!("{lfs}/objects/batch"), ""),
        ("POST", format!("{lfs}/verify"), ""),
        ("GET", format!("{lfs}/xet-read-token"), ""),
        ("GET", format!("{lfs}/xet-write-token"), ""),
        ("PUT", format!("{lfs}/objects/{oid}"), ""),
        ("GET", format!("{lfs}/objects/{oid}"), ""),
        ("GET", format!("{lfs}/locks"), ""),
        ("POST", format!("{lfs}/locks"), ""),
        ("POST", format!("{lfs}/locks/verify"), ""),
        ("POST", format!("{lfs}/locks/1/unlock"), ""),
    ];
    // The table covers every route that reads a token.
    let unauthenticated = [
        "health",
        "ready",
        "metrics",
        "telemetry",
        "xorb_data",
        "other",
    ];
    let covered: std::collections::BTreeSet<&str> = routes
        .iter()
        .map(|(m, p, _)| {
            let path = p.split('?').next().unwrap();
            git_xet_server::http::route_label(&m.parse().unwrap(), path)
        })
        .collect();
    for label in git_xet_server::http::ROUTE_LABELS {
        assert!(
            covered.contains(label) || unauthenticated.contains(label),
            "route {label} is not in the table"
        );
    }
    let send = |method: &str, path: &str, accept: &str| {
        let mut req = client()
            .request(method.parse().unwrap(), format!("{}{path}", server.url))
            .bearer_auth(&token)
            .header("Content-Type", "application/vnd.git-lfs+json")
            .body("{}");
        if !accept.is_empty() {
            req = req.header("Accept", accept);
        }
        let r = req.send().unwrap();
        (r.status().as_u16(), r.text().unwrap_or_default())
    };
    // Before: accepted (no 401/403) on the read routes.
    let (status, body) = send("GET", "/", "");
    assert_eq!(status, 200, "{body}");

    revoke(&server, &token_id(&token));
    let probe = format!("/v1/chunks/default/{x}");
    refused_within_the_cache_ttl(|| send("GET", &probe, "").0 == 403);
    for (method, path, accept) in &routes {
        let (status, body) = send(method, path, accept);
        assert_eq!(status, 403, "{method} {path}: {body}");
        assert!(body.contains("was revoked"), "{method} {path}: {body}");
    }
}
