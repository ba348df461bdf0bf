//! OpenID Connect tokens: a test issuer (keys made by the openssl CLI, discovery document and
//! JWKS served on 127.0.0.1 by the test) and a server that accepts its JWTs, mapped to rules
//! by a policy file. Expired, not-yet-valid, wrong-audience, wrong-issuer, tampered, `alg:
//! none` and HMAC-with-the-public-key tokens are refused; keys rotate; the policy reloads;
//! git and git-lfs push and clone with a JWT from a credential helper script.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use crate::common::client;
use crate::gitenv::GitEnv;
use crate::support::{random_bytes, write_file, TestServer};

const AUD: &str = "git-xet-test";

/// A private key made by the openssl CLI, PEM (PKCS#8).
fn openssl_key(dir: &Path, name: &str, args: &[&str]) -> Vec<u8> {
    let path = dir.join(name);
    let out = Command::new("openssl")
        .args(["genpkey", "-out"])
        .arg(&path)
        .args(args)
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(path).unwrap()
}

fn public_pem(dir: &Path, name: &str) -> Vec<u8> {
    let out = Command::new("openssl")
        .args(["pkey", "-pubout", "-in"])
        .arg(dir.join(name))
        .output()
        .unwrap();
    assert!(out.status.success());
    out.stdout
}

struct Key {
    kid: String,
    alg: Algorithm,
    encoding: EncodingKey,
    jwk: Jwk,
}

impl Key {
    fn new(kid: &str, alg: Algorithm, pem: &[u8]) -> Key {
        let encoding = match alg {
            Algorithm::ES256 => EncodingKey::from_ec_pem(pem).unwrap(),
            _ => EncodingKey::from_rsa_pem(pem).unwrap(),
        };
        let mut jwk = Jwk::from_encoding_key(&encoding, alg).unwrap();
        jwk.common.key_id = Some(kid.into());
        Key {
            kid: kid.into(),
            alg,
            encoding,
            jwk,
        }
    }

    fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).unwrap()
    }
}

/// The issuer: discovery and a JWKS the test can change, on 127.0.0.1, until the test ends.
struct Issuer {
    url: String,
    jwks: Arc<Mutex<JwkSet>>,
    fetches: Arc<Mutex<usize>>,
}

impl Issuer {
    fn start() -> Issuer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let jwks = Arc::new(Mutex::new(JwkSet { keys: vec![] }));
        let fetches = Arc::new(Mutex::new(0));
        let (served, count, base) = (jwks.clone(), fetches.clone(), url.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut line = String::new();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
                        break;
                    }
                }
                let body = if line.contains("/.well-known/openid-configuration") {
                    json!({"issuer": base, "jwks_uri": format!("{base}/jwks")}).to_string()
                } else {
                    *count.lock().unwrap() += 1;
                    serde_json::to_string(&*served.lock().unwrap()).unwrap()
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Issuer { url, jwks, fetches }
    }

    fn publish(&self, keys: &[&Key]) {
        self.jwks.lock().unwrap().keys = keys.iter().map(|k| k.jwk.clone()).collect();
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn claims(issuer: &str, sub: &str, groups: &[&str]) -> Value {
    json!({"iss": issuer, "aud": AUD, "sub": sub, "groups": groups,
           "iat": now(), "exp": now() + 600})
}

/// The status of a read of `repo` with `jwt`: 404 (accepted, no such repository), else the
/// refusal's status and message.
fn read_status(server: &TestServer, repo: &str, jwt: &str) -> (u16, String) {
    let r = client()
        .get(format!(
            "{}/{repo}.git/info/refs?service=git-upload-pack",
            server.url
        ))
        .bearer_auth(jwt)
        .send()
        .unwrap();
    (r.status().as_u16(), r.text().unwrap())
}

#[test]
fn oidc_tokens_are_verified_mapped_by_the_policy_and_refused_when_they_should_be() {
    let dir = tempfile::tempdir().unwrap();
    let rsa = openssl_key(
        dir.path(),
        "rsa.pem",
        &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
    );
    let ec = openssl_key(
        dir.path(),
        "ec.pem",
        &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
    );
    let k1 = Key::new("k1", Algorithm::RS256, &rsa);
    let k2 = Key::new("k2", Algorithm::ES256, &ec);
    let issuer = Issuer::start();
    issuer.publish(&[&k1]);
    let policy = dir.path().join("policy");
    std::fs::write(
        &policy,
        "# who may do what\ngroup:ml-team org/*:write\nsub:carol org/model:read\n",
    )
    .unwrap();
    // Its clock moves: the key cache and the policy file age without the test waiting.
    let server = TestServer::start_with_clock(&[
        "--oidc-issuer",
        &issuer.url,
        "--oidc-audience",
        AUD,
        "--policy",
        policy.to_str().unwrap(),
    ]);
    let iss = issuer.url.as_str();
    let good = k1.sign(&claims(iss, "alice", &["ml-team"]));
    assert_eq!(read_status(&server, "org/model", &good).0, 404, "accepted");
    let (status, why) = read_status(&server, "other/x", &good);
    assert_eq!(status, 404);
    assert!(
        why.contains("no access to other/x") && why.contains("org/*:write"),
        "{why}"
    );
    // The Basic password works too.
    let basic = client()
        .get(format!(
            "{}/org/model.git/info/refs?service=git-upload-pack",
            server.url
        ))
        .basic_auth("oauth2", Some(&good))
        .send()
        .unwrap();
    assert_eq!(basic.status().as_u16(), 404);
    let carol = k1.sign(&claims(iss, "carol", &[]));
    assert_eq!(read_status(&server, "org/model", &carol).0, 404);
    // Not found, whether org/other exists or not; the message names the missing rule.
    let (status, why) = read_status(&server, "org/other", &carol);
    assert_eq!(status, 404);
    assert!(why.contains("no access to org/other"), "{why}");
    let nobody = k1.sign(&claims(iss, "dave", &["elsewhere"]));
    let (status, why) = read_status(&server, "org/model", &nobody);
    assert_eq!(status, 403);
    assert!(
        why.contains("given no repository by the server's policy"),
        "{why}"
    );

    // Refusals: each a 401 that says why.
    let mut refused = Vec::new();
    let mut with = |name: &str, edit: &dyn Fn(&mut Value)| {
        let mut c = claims(iss, "alice", &["ml-team"]);
        edit(&mut c);
        refused.push((name.to_string(), k1.sign(&c)));
    };
    with("expired", &|c| {
        c["exp"] = json!(now() - 600);
    });
    with("not yet valid", &|c| {
        c["nbf"] = json!(now() + 600);
    });
    with("wrong audience", &|c| {
        c["aud"] = json!("someone-else");
    });
    with("wrong issuer", &|c| {
        c["iss"] = json!("http://127.0.0.1:1");
    });
    let (head, rest) = good.split_once('.').unwrap();
    let (payload, sig) = rest.split_once('.').unwrap();
    let mut claims_json: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
    claims_json["groups"] = json!(["ml-team", "admins"]);
    let forged_payload = URL_SAFE_NO_PAD.encode(claims_json.to_string());
    refused.push(("tampered".into(), format!("{head}.{forged_payload}.{sig}")));
    let none_head = URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT","kid":"k1"}"#);
    refused.push(("alg none".into(), format!("{none_head}.{payload}.")));
    let public = public_pem(dir.path(), "rsa.pem");
    let mut hs = Header::new(Algorithm::HS256);
    hs.kid = Some("k1".into());
    let hmac = jsonwebtoken::encode(
        &hs,
        &claims(iss, "alice", &["ml-team"]),
        &EncodingKey::from_secret(&public),
    )
    .unwrap();
    refused.push(("HS256 with the public key".into(), hmac));
    for (name, jwt) in &refused {
        let (status, why) = read_status(&server, "org/model", jwt);
        assert_eq!(status, 401, "{name}: {why}");
        assert!(why.contains("OIDC token refused"), "{name}: {why}");
        assert!(!why.contains(jwt.as_str()), "the token is echoed");
    }
    assert!(!server.log_text().contains(&good), "a JWT was logged");

    // Key rotation: a token signed with a new key (ES256) is accepted once the issuer
    // publishes it, through a refetch for the unknown kid.
    let fetched = *issuer.fetches.lock().unwrap();
    issuer.publish(&[&k1, &k2]);
    server.advance_clock(6); // past MIN_REFETCH since the last fetch
    let rotated = k2.sign(&claims(iss, "alice", &["ml-team"]));
    assert_eq!(
        read_status(&server, "org/model", &rotated).0,
        404,
        "new key"
    );
    assert_eq!(*issuer.fetches.lock().unwrap(), fetched + 1);
    // Unknown kids do not make the server hammer the issuer.
    let mut unknown = Header::new(Algorithm::ES256);
    unknown.kid = Some("k9".into());
    for _ in 0..5 {
        let jwt = jsonwebtoken::encode(&unknown, &claims(iss, "a", &[]), &k2.encoding).unwrap();
        assert_eq!(read_status(&server, "org/model", &jwt).0, 401);
    }
    assert!(*issuer.fetches.lock().unwrap() <= fetched + 2);

    // The policy reloads without a restart; a broken file keeps the one in force.
    std::fs::write(&policy, "group:ml-team org/model:read\n").unwrap();
    set_mtime_later(&policy);
    server.advance_clock(2); // past the policy file's check period
    let (status, why) = read_status(&server, "org/other", &good);
    assert_eq!(status, 404, "org rule gone: {why}");
    assert!(why.contains("no access to org/other"), "{why}");
    assert_eq!(read_status(&server, "org/model", &good).0, 404);
    std::fs::write(&policy, "group:ml-team org/*/*:write\n").unwrap();
    set_mtime_later(&policy);
    server.advance_clock(2); // past the policy file's check period
    assert_eq!(
        read_status(&server, "org/model", &good).0,
        404,
        "old policy kept"
    );
    server.wait_for_log("policy file not reloaded");
}

/// Moves a file's modification time 10 s on (a rewrite within the same second keeps it).
fn set_mtime_later(path: &Path) {
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(10);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(later)
        .unwrap();
}

#[test]
fn git_lfs_pushes_and_clones_with_a_jwt_from_a_credential_helper() {
    let dir = tempfile::tempdir().unwrap();
    let rsa = openssl_key(
        dir.path(),
        "rsa.pem",
        &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
    );
    let key = Key::new("k1", Algorithm::RS256, &rsa);
    let issuer = Issuer::start();
    issuer.publish(&[&key]);
    let policy = dir.path().join("policy");
    std::fs::write(&policy, "group:ml-team org/*:write\n").unwrap();
    let server = TestServer::start_with(&[
        "--oidc-issuer",
        &issuer.url,
        "--oidc-audience",
        AUD,
        "--policy",
        policy.to_str().unwrap(),
    ]);
    let jwt = key.sign(&claims(&issuer.url, "alice", &["ml-team"]));
    let env = GitEnv::new(None);
    // The helper a user would get from git-credential-oauth or a CI job: a JWT as password.
    let token_file = dir.path().join("jwt");
    std::fs::write(&token_file, &jwt).unwrap();
    let helper = dir.path().join("helper.sh");
    std::fs::write(
        &helper,
        format!(
            "#!/bin/sh\necho username=oauth2\necho password=$(cat '{}')\n",
            token_file.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    env.git(
        env.home.path(),
        &[
            "config",
            "--global",
            "credential.helper",
            helper.to_str().unwrap(),
        ],
    );

    let work = env.home.path().join("work");
    env.new_repo(&work);
    let data = random_bytes(300_000, 77);
    write_file(&work.join("model.bin"), &data);
    env.git(&work, &["add", "."]);
    env.git(&work, &["commit", "-q", "-m", "one"]);
    let url = format!("{}/org/model.git", server.url);
    env.git(&work, &["remote", "add", "origin", &url]);
    env.git(&work, &["push", "-q", "origin", "main"]);
    let clone = env.home.path().join("clone");
    env.git(
        env.home.path(),
        &["clone", "-q", &url, clone.to_str().unwrap()],
    );
    assert_eq!(std::fs::read(clone.join("model.bin")).unwrap(), data);
    // The reflog names the JWT's subject (the status page's "Recent pushes").
    let reflog =
        std::fs::read_to_string(server.data.join("repos/org/model.git/logs/refs/heads/main"))
            .unwrap();
    assert!(reflog.contains(" alice <"), "{reflog}");
    // Another org: git prints which rule is missing.
    let err = env.git_fails(
        &work,
        &["push", &format!("{}/team/x.git", server.url), "main"],
    );
    assert!(
        err.contains("remote: this credential has no access to team/x"),
        "{err}"
    );
}
