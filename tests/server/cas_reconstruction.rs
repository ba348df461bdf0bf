//! GET /v1/reconstructions/{file} (whole and ranges), and the signed xorb data URLs.

use crate::common::*;
use crate::support::TestServer;

#[test]
fn reconstructions_rebuild_whole_files_and_any_range() {
    let server = TestServer::start();
    let cas = Cas::new(&server, "org/repo", "write");
    let up = Upload::random(1_500_000, 20, 6);
    cas.upload(&up);
    let data = &up.data;
    assert_eq!(cas.download(&up.file_hash, None), *data);

    let chunk_edges: Vec<u64> = chunks_of(data)
        .iter()
        .scan(0u64, |pos, c| {
            *pos += c.data.len() as u64;
            Some(*pos)
        })
        .collect();
    let n = data.len() as u64;
    let e = chunk_edges[3];
    let ranges = [
        (0, 0),
        (0, n - 1),
        (n - 1, n - 1),
        (e - 1, e),
        (e, e),
        (e, e + 10),
        (12345, 700_000),
        (1, n - 2),
    ];
    for (a, b) in ranges {
        let got = cas.download(&up.file_hash, Some((a, b)));
        assert_eq!(got, data[a as usize..=b as usize], "range {a}-{b}");
    }
    // A range inside one chunk is answered with that chunk alone.
    let rec = cas.reconstruction(&up.file_hash, Some((e + 1, e + 2)));
    assert_eq!(rec.terms.len(), 1);
    assert_eq!(rec.terms[0].range.end - rec.terms[0].range.start, 1);
    assert_eq!(rec.offset_into_first_range, 1);
    // An end past the file is clamped, like HTTP.
    let got = cas.download(&up.file_hash, Some((n - 5, n - 1)));
    let rec = cas.reconstruction(&up.file_hash, Some((n - 5, n + 1000)));
    assert_eq!(
        rebuild(&cas.http, &rec)[rec.offset_into_first_range as usize..],
        got[..]
    );
    assert!(server.metric("git_xet_xorb_bytes_served_total") > 0.0);
}

#[test]
fn reconstruction_errors() {
    let server = TestServer::start();
    let cas = Cas::new(&server, "org/repo", "write");
    let up = Upload::random(200_000, 21, 1000);
    cas.upload(&up);
    let h = up.file_hash.to_hex();
    let n = up.data.len();
    assert_eq!(
        cas.reconstruction_raw(&h, Some(&format!("bytes={n}-")))
            .status(),
        416
    );
    // RFC 9110: a Range that is not one well-formed bytes range is ignored (the whole).
    let whole = cas.reconstruction_raw(&h, None).text().unwrap();
    for odd in ["bytes=9-3", "lines=1-2", "bytes=0-1,5-6"] {
        let r = cas.reconstruction_raw(&h, Some(odd));
        assert_eq!(r.status(), 200, "{odd}");
        let v: serde_json::Value = serde_json::from_str(&r.text().unwrap()).unwrap();
        let w: serde_json::Value = serde_json::from_str(&whole).unwrap();
        assert_eq!(v["terms"], w["terms"], "{odd}");
    }
    assert_eq!(cas.reconstruction_raw(&"1".repeat(64), None).status(), 404);
    assert_eq!(cas.reconstruction_raw("not-a-hash", None).status(), 400);
    let anonymous = client()
        .get(format!("{}/v1/reconstructions/{h}", server.url))
        .send()
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let expired = Cas::with_token(&server, &server.expired_token("org/repo", "read"));
    assert_eq!(expired.reconstruction_raw(&h, None).status(), 401);
    // Served under /api/v1 too.
    let r = cas
        .http
        .get(format!("{}/api/v1/reconstructions/{h}", server.url))
        .bearer_auth(&cas.token)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[test]
fn files_are_visible_only_in_their_repository() {
    let server = TestServer::start();
    let a = Cas::new(&server, "org/a", "write");
    let b = Cas::new(&server, "org/b", "write");
    let up = Upload::random(300_000, 22, 1000);
    a.upload(&up);
    let h = up.file_hash.to_hex();
    assert_eq!(a.reconstruction_raw(&h, None).status(), 200);
    assert_eq!(
        b.reconstruction_raw(&h, None).status(),
        404,
        "other repository"
    );
    // Repository b proves it has the content (xorbs are deduplicated, the shard is checked)
    // and then sees the file too, without storing anything twice.
    for x in &up.xorbs {
        assert!(!b.post_xorb(x));
    }
    assert_eq!(b.post_shard(&up.shard), 1, "new in repository b");
    assert_eq!(b.download(&up.file_hash, None), up.data);
    assert_eq!(server.metric("git_xet_stored_xorbs"), up.xorbs.len() as f64);
    assert_eq!(server.metric("git_xet_registered_files"), 1.0);
}

#[test]
fn fetch_urls_are_signed_range_capable_and_tamper_proof() {
    let server = TestServer::start();
    let cas = Cas::new(&server, "org/repo", "write");
    let up = Upload::random(400_000, 23, 1000);
    cas.upload(&up);
    let rec = cas.reconstruction(&up.file_hash, None);
    let info = &rec.fetch_info[&up.xorbs[0].hash][0];
    let url = &info.url;
    let http = client();
    let total = up.xorbs[0].bytes.len();
    let records_end = *up.xorbs[0].footer.chunk_ends.last().unwrap() as u64;
    assert_eq!(
        info.url_range.end,
        records_end - 1,
        "the chunk records, not the footer"
    );

    // The URL grants the chunk records the file uses: asked with exactly that Range, or a
    // part of it; a request without one is refused.
    let all = http
        .get(url)
        .header("Range", info.url_range.header_value())
        .send()
        .unwrap();
    assert_eq!(all.status(), 206);
    assert_eq!(
        all.bytes().unwrap(),
        up.xorbs[0].bytes[..=info.url_range.end as usize]
    );
    assert_eq!(http.get(url).send().unwrap().status(), 403);

    let part = http.get(url).header("Range", "bytes=10-19").send().unwrap();
    assert_eq!(part.status(), 206);
    assert_eq!(
        part.headers()["content-range"],
        format!("bytes 10-19/{total}").as_str()
    );
    assert_eq!(part.bytes().unwrap(), up.xorbs[0].bytes[10..20]);
    assert_eq!(
        http.get(url)
            .header("Range", format!("bytes={total}-"))
            .send()
            .unwrap()
            .status(),
        416
    );

    let (base, query) = url.split_once('?').unwrap();
    let sig = query
        .split('&')
        .find_map(|p| p.strip_prefix("sig="))
        .unwrap();
    let expires: u64 = query
        .split('&')
        .find_map(|p| p.strip_prefix("expires="))
        .unwrap()
        .parse()
        .unwrap();
    let signed = query.rsplit_once("&expires=").unwrap().0;
    let mut bad_sig = sig.to_string().into_bytes();
    bad_sig[0] = if bad_sig[0] == b'A' { b'B' } else { b'A' };
    let bad_sig = String::from_utf8(bad_sig).unwrap();
    let tampered = [
        format!("{base}?{signed}&expires={expires}&sig={bad_sig}"),
        format!("{base}?{signed}&expires={}&sig={sig}", expires + 3600),
        format!("{base}?{signed}&expires={expires}"),
        format!("{base}?expires={expires}&sig={sig}"),
        base.to_string(),
        format!(
            "{}/v1/xorb-data/{}?{signed}&expires={expires}&sig={sig}",
            server.url,
            "2".repeat(64)
        ),
    ];
    for t in tampered {
        let r = http.get(&t).header("Range", "bytes=0-9").send().unwrap();
        assert_eq!(r.status(), 403, "{t}");
    }
}

#[test]
fn fetch_urls_expire() {
    let server = TestServer::start_with_clock(&["--fetch-url-ttl", "60"]);
    let cas = Cas::new(&server, "org/repo", "write");
    let up = Upload::random(100_000, 24, 1000);
    cas.upload(&up);
    let rec = cas.reconstruction(&up.file_hash, None);
    let info = &rec.fetch_info[&up.xorbs[0].hash][0];
    let fetch = || {
        client()
            .get(&info.url)
            .header("Range", info.url_range.header_value())
            .send()
            .unwrap()
    };
    assert_eq!(fetch().status(), 206, "good until it expires");
    server.advance_clock(61);
    let (status, v) = json(fetch());
    assert_eq!(status, 403);
    assert!(reason(&v).contains("expired"), "{v}");
}

#[test]
fn health_and_unknown_routes() {
    let server = TestServer::start();
    let r = client()
        .get(format!("{}/health", server.url))
        .send()
        .unwrap();
    assert_eq!(
        (r.status().as_u16(), r.text().unwrap().trim().to_string()),
        (200, "ok".to_string())
    );
    assert_eq!(
        client()
            .get(format!("{}/nope", server.url))
            .send()
            .unwrap()
            .status(),
        404
    );
    assert_eq!(
        client()
            .get(format!(
                "{}/v1/xorbs/default/{}",
                server.url,
                "0".repeat(64)
            ))
            .send()
            .unwrap()
            .status(),
        405
    );
    let text = server.metrics();
    assert!(
        text.contains("git_xet_http_requests_total{route=\"health\",status=\"200\"} 1"),
        "{text}"
    );
    assert!(text.contains("# TYPE git_xet_stored_xorbs gauge"));
}

/// A correctly signed URL for a xorb the server does not have is a 404, not a 403.
#[test]
fn signed_url_for_a_missing_xorb_is_not_found() {
    let server = TestServer::start();
    let keys = git_xet_identity::keys::Keys::load_or_create(&server.data).unwrap();
    let xorb = git_xet_core::MerkleHash::from_bytes([9; 32]);
    let expires = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 60;
    let grant = git_xet_identity::signing::Grant {
        xorb,
        bytes: git_xet_core::reconstruction::HttpRange { start: 0, end: 9 },
        token_id: String::new(),
        expires,
    };
    let url = git_xet_identity::signing::fetch_url(&keys, &server.url, &grant);
    let r = client()
        .get(&url)
        .header("Range", "bytes=0-9")
        .send()
        .unwrap();
    assert_eq!(r.status(), 404);
}
