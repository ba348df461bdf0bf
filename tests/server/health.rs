//! Liveness (`/health`, `/healthz`) and readiness (`/readyz`) against real engines: a
//! PostgreSQL index stopped and started again, a Garage object store's endpoint stopped and
//! started again; a probe storm costs the index one query a second; and the request id that
//! every answer carries, in JSON log lines.

use std::time::{Duration, Instant};

use crate::common::client;
use crate::support::garage::Garage;
use crate::support::{postgres, TestServer};

/// (status, body) of `GET path`, anonymous.
fn get(server: &TestServer, path: &str) -> (u16, String) {
    let response = client()
        .get(format!("http://{}{path}", server.addr()))
        .timeout(Duration::from_secs(30))
        .send()
        .unwrap();
    (response.status().as_u16(), response.text().unwrap())
}

/// Polls `/readyz` until it answers `status` (a readiness answer lives a second, a probe
/// waits up to 3 s for a silent part).
fn wait_ready(server: &TestServer, status: u16) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (got, body) = get(server, "/readyz");
        if got == status {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "/readyz still answers {got} ({body}), not {status}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn assert_live(server: &TestServer) {
    for path in ["/health", "/healthz"] {
        assert_eq!(get(server, path), (200, "ok\n".to_string()), "{path}");
    }
}

#[test]
fn readiness_follows_a_postgres_index_stopped_and_started_again() {
    let Some(cluster) = postgres::own_cluster() else {
        return;
    };
    cluster.run_client("createdb", &["xet"]);
    let store = tempfile::tempdir().unwrap();
    let store = store.path().display().to_string();
    let url = cluster.url("xet");
    let server = TestServer::start_with(&["--index", &url, "--object-store", &store]);
    assert_eq!(get(&server, "/readyz"), (200, "ready\n".to_string()));
    assert_live(&server);

    // A storm of probes costs the index at most one query per second: PostgreSQL logs every
    // statement, and the probe's lookup of the all-zero xorb hash is counted.
    cluster.run_client(
        "psql",
        &["-d", "xet", "-c", "ALTER SYSTEM SET log_statement = 'all'"],
    );
    cluster.run_client("psql", &["-d", "xet", "-c", "SELECT pg_reload_conf()"]);
    std::thread::sleep(Duration::from_millis(1500));
    let probes = |log: &str| log.matches(&"0".repeat(64)).count();
    let before = probes(&cluster.log_text());
    let started = Instant::now();
    let storm: Vec<_> = (0..8)
        .map(|_| {
            let addr = server.addr();
            std::thread::spawn(move || {
                let http = client();
                for _ in 0..25 {
                    let r = http.get(format!("http://{addr}/readyz")).send().unwrap();
                    assert_eq!(r.status().as_u16(), 200);
                }
            })
        })
        .collect();
    storm.into_iter().for_each(|t| t.join().unwrap());
    let secs = started.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(300));
    let queried = probes(&cluster.log_text()) - before;
    eprintln!("200 probes in {secs:.2}s queried the index {queried} times");
    assert!(
        (queried as f64) <= secs.ceil() + 1.0,
        "200 probes in {secs:.2}s queried the index {queried} times"
    );

    cluster.stop();
    let body = wait_ready(&server, 503);
    assert!(body.starts_with("not ready: the index"), "{body}");
    assert!(!body.contains("object store"), "{body}");
    assert_live(&server);
    // The answer is not the status page's: no repository, no token needed, nothing cached.
    assert!(!body.contains("org/"), "{body}");

    cluster.start_again();
    assert_eq!(wait_ready(&server, 200), "ready\n");
    let log = server.log_text();
    assert!(log.contains("not ready: the index"), "{log}");
    assert!(log.contains("ready again"), "{log}");
}

#[test]
fn readiness_follows_a_garage_object_store_stopped_and_started_again() {
    // Its own cluster: stopping a node of the shared one would disturb the other tests.
    let Some(mut garage) = Garage::start() else {
        return;
    };
    let server = TestServer::start_on_garage(&garage, "ready", &[]);
    assert_eq!(get(&server, "/readyz"), (200, "ready\n".to_string()));
    // The server's endpoint is the first node's.
    garage.stop_node(0);
    let body = wait_ready(&server, 503);
    assert!(body.starts_with("not ready: the object store"), "{body}");
    assert_live(&server);
    garage.restart_node(0);
    assert_eq!(wait_ready(&server, 200), "ready\n");
}

/// Every answer carries a request id: the client's when it is sane, else a new one; error
/// bodies and JSON log lines carry it too.
#[test]
fn json_log_lines_and_error_bodies_carry_the_request_id() {
    let server = TestServer::start_with(&["--log-format", "json"]);
    let http = client();
    let refused = |id: Option<&str>| {
        let mut request = http.get(format!(
            "http://{}/v1/reconstructions/{}",
            server.addr(),
            "ab".repeat(32)
        ));
        if let Some(id) = id {
            request = request.header("X-Request-Id", id);
        }
        let response = request.send().unwrap();
        assert_eq!(response.status().as_u16(), 401);
        let header = response.headers()["x-request-id"]
            .to_str()
            .unwrap()
            .to_string();
        let body: serde_json::Value = response.json().unwrap();
        assert_eq!(body["request_id"], header.as_str(), "{body}");
        let message = body["message"].as_str().unwrap();
        assert!(
            message.ends_with(&format!("(request id {header})")),
            "{message}"
        );
        header
    };
    assert_eq!(refused(Some("report-1234")), "report-1234");
    let made = refused(None);
    assert!(
        made.len() == 16 && made.bytes().all(|b| b.is_ascii_hexdigit()),
        "{made}"
    );
    let long = "x".repeat(65);
    for insane in [long.as_str(), "a b", "a\"b"] {
        let id = refused(Some(insane));
        assert_ne!(id, insane);
        assert_eq!(id.len(), 16);
    }

    // Every line of the log is one JSON object; the refused request's line carries its id.
    server.wait_for_log("report-1234");
    let log = server.log_text();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(lines.len() > 2, "{log}");
    for line in &lines {
        assert!(
            line["timestamp"].is_string() && line["level"].is_string(),
            "{line}"
        );
    }
    let request = lines
        .iter()
        .find(|l| l["request_id"] == "report-1234")
        .unwrap_or_else(|| panic!("no line with the id:\n{log}"));
    assert_eq!(request["message"], "request", "{request}");
    assert_eq!(request["status"], 401, "{request}");
    assert_eq!(
        request["path"],
        format!("/v1/reconstructions/{}", "ab".repeat(32))
    );
    assert!(
        lines.iter().any(|l| l["request_id"] == made.as_str()),
        "{log}"
    );
}
