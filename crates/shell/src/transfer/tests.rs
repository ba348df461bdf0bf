//! The protocol's framing and refusals, on in-memory streams. Object moves are tested end
//! to end against the real server, sshd and git-lfs (tests/git/ssh_shell.rs).

use super::*;
use locks::{LockInfo, LockList, LockReply, Locks, OwnerInfo};
use upstream::Action;

/// Objects that are never reached: these tests stop before any object moves.
struct Unreachable;

impl Objects for Unreachable {
    fn batch(
        &self,
        _: LfsOperation,
        objects: &[(String, u64)],
        _: Option<&str>,
    ) -> Result<Vec<ObjectResponse>, ShellError> {
        Err(ShellError::Upstream {
            status: 503,
            message: format!("no server ({} objects)", objects.len()),
        })
    }
    fn download(&self, _: &Action) -> Result<(Option<u64>, Box<dyn Read>), ShellError> {
        unreachable!("no download in these tests")
    }
    fn upload(&self, _: &Action, _: Box<dyn Read + Send>, _: u64) -> Result<(), ShellError> {
        unreachable!("no upload in these tests")
    }
}

fn no_server<T>() -> Result<T, ShellError> {
    Err(ShellError::Upstream {
        status: 503,
        message: "no server (locks)".into(),
    })
}

impl Locks for Unreachable {
    fn lock(&self, _: &str, _: Option<&str>) -> Result<LockReply, ShellError> {
        no_server()
    }
    fn list(&self, _: &[(&str, &str)]) -> Result<LockList, ShellError> {
        no_server()
    }
    fn verify(&self, _: &str, _: Option<&str>, _: Option<u64>) -> Result<LockList, ShellError> {
        no_server()
    }
    fn unlock(&self, _: &str, _: bool, _: Option<&str>) -> Result<LockInfo, ShellError> {
        no_server()
    }
    fn user(&self) -> &str {
        "alice"
    }
}

fn pkt(text: &str) -> Vec<u8> {
    format!("{:04x}{text}", text.len() + 4).into_bytes()
}

/// Runs a session on `input`; returns what was answered and the session's result.
fn session(input: Vec<u8>, op: LfsOperation) -> (String, Result<(), ShellError>) {
    session_with(input, op, &Unreachable)
}

fn session_with(
    input: Vec<u8>,
    op: LfsOperation,
    remote: &dyn Remote,
) -> (String, Result<(), ShellError>) {
    let mut out = Vec::new();
    let result = {
        let mut io = PktIo::new(std::io::Cursor::new(input), &mut out);
        serve(&mut io, op, remote)
    };
    (String::from_utf8_lossy(&out).into_owned(), result)
}

fn request(parts: &[&str]) -> Vec<u8> {
    let mut v = Vec::new();
    for p in parts {
        match *p {
            "FLUSH" => v.extend_from_slice(b"0000"),
            "DELIM" => v.extend_from_slice(b"0001"),
            text => v.extend(pkt(&format!("{text}\n"))),
        }
    }
    v
}

#[test]
fn version_locks_and_quit_are_answered_in_order() {
    let input = request(&[
        "version 1",
        "FLUSH",
        "version 2",
        "FLUSH",
        "list-lock",
        "limit=10",
        "FLUSH",
        "lock",
        "path=a.psd",
        "FLUSH",
        "frobnicate",
        "FLUSH",
        "get-object 0000000000000000000000000000000000000000000000000000000000000000",
        "FLUSH",
        "quit",
        "FLUSH",
        "version 1",
        "FLUSH", // after quit: never read
    ]);
    let (out, result) = session(input, LfsOperation::Upload);
    result.unwrap();
    let error = |status: u16, message: &str| {
        format!(
            "000fstatus {status}\n0001{}0000",
            String::from_utf8(pkt(&format!("{message}\n"))).unwrap()
        )
    };
    let no_locks = error(503, "no server (locks)");
    let expected = [
        "000eversion=1\n000clocking\n0000".to_string(),
        "000fstatus 200\n0000".to_string(),
        error(400, "only version 1 is supported"),
        no_locks.clone(),
        no_locks,
        error(400, "unknown command \"frobnicate\""),
        error(405, "get-object is not allowed in a session for upload"),
        "000fstatus 200\n0000".to_string(),
    ]
    .concat();
    assert_eq!(out, expected);
}

#[test]
fn malformed_batches_are_refused_without_asking_the_server() {
    let oid = "a".repeat(64);
    for (lines, want) in [
        (vec!["zz 1"], "malformed object line"),
        (vec![&*format!("{oid} -1")], "malformed object line"),
        (
            vec![&*format!("{} 1", "A".repeat(64))],
            "malformed object line",
        ),
        (vec![&*oid], "malformed object line"),
    ] {
        let mut parts = vec!["batch", "transfer=ssh", "DELIM"];
        parts.extend(lines);
        parts.extend(["FLUSH", "quit", "FLUSH"]);
        let (out, result) = session(request(&parts), LfsOperation::Download);
        result.unwrap();
        assert!(out.contains("status 400") && out.contains(want), "{out}");
        assert!(
            out.ends_with("000fstatus 200\n0000"),
            "still in step: {out}"
        );
    }
    // Oversized bodies are refused before they are held: the session stays in step.
    let long = format!("{oid} 1 {}", "k=v ".repeat(400));
    let many: Vec<String> = (0..10_001).map(|_| format!("{oid} 1")).collect();
    let mut parts = vec!["batch", "DELIM", &long, "FLUSH", "batch", "DELIM"];
    parts.extend(many.iter().map(String::as_str));
    parts.extend(["FLUSH", "quit", "FLUSH"]);
    let (out, result) = session(request(&parts), LfsOperation::Download);
    result.unwrap();
    assert!(out.contains("a line longer than 1024 bytes"), "{out}");
    assert!(out.contains("more than 10000 lines"), "{out}");
    assert!(out.ends_with("000fstatus 200\n0000"), "{out}");
    let args: Vec<String> = (0..65).map(|i| format!("a{i}=1")).collect();
    let mut parts = vec!["version 1"];
    parts.extend(args.iter().map(String::as_str));
    parts.push("FLUSH");
    let (_, result) = session(request(&parts), LfsOperation::Download);
    assert!(
        matches!(result, Err(ShellError::Protocol(_))),
        "too many arguments"
    );
    // A valid batch reaches the server; its error is passed on as the batch's status.
    let line = format!("{oid} 5");
    let parts = ["batch", "DELIM", &line, "FLUSH"];
    let (out, _) = session(request(&parts), LfsOperation::Download);
    assert!(
        out.contains("status 503") && out.contains("no server (1 objects)"),
        "{out}"
    );
}

#[test]
fn broken_framing_ends_the_session_with_an_error_and_never_panics() {
    for input in [
        b"zzzz".to_vec(),
        b"0003".to_vec(),
        b"ffff".to_vec(),
        b"0009batch".to_vec(), // cut short
        [pkt("batch\n"), b"0001".to_vec(), pkt(&"x".repeat(70000))].concat(),
        [b"0001".to_vec()].concat(),
        [pkt("quit\n"), vec![0xff; 3]].concat(),
    ] {
        let (_, result) = session(input.clone(), LfsOperation::Download);
        assert!(result.is_err(), "{:?}", String::from_utf8_lossy(&input));
    }
    // A client that leaves between requests ends the session quietly.
    let (_, result) = session(request(&["version 1", "FLUSH"]), LfsOperation::Download);
    result.unwrap();
}

/// A locking API holding one lock of bob's on `a.psd`, to check how answers are framed.
struct Held;

fn bobs() -> LockInfo {
    LockInfo {
        id: "b0b".into(),
        path: "a b.psd".into(),
        locked_at: "2026-01-02T03:04:05Z".into(),
        owner: Some(OwnerInfo { name: "bob".into() }),
    }
}

impl Objects for Held {
    fn batch(
        &self,
        op: LfsOperation,
        objects: &[(String, u64)],
        r: Option<&str>,
    ) -> Result<Vec<ObjectResponse>, ShellError> {
        Unreachable.batch(op, objects, r)
    }
    fn download(&self, a: &Action) -> Result<(Option<u64>, Box<dyn Read>), ShellError> {
        Unreachable.download(a)
    }
    fn upload(&self, a: &Action, b: Box<dyn Read + Send>, n: u64) -> Result<(), ShellError> {
        Unreachable.upload(a, b, n)
    }
}

impl Locks for Held {
    fn lock(&self, path: &str, _: Option<&str>) -> Result<LockReply, ShellError> {
        assert_eq!(path, "a b.psd");
        Ok(LockReply::Exists(
            bobs(),
            "a b.psd is already locked by bob".into(),
        ))
    }
    fn list(&self, query: &[(&str, &str)]) -> Result<LockList, ShellError> {
        assert_eq!(query, [("path", "a b.psd")]);
        Ok(LockList {
            locks: vec![(bobs(), None)],
            next_cursor: Some("c1".into()),
        })
    }
    fn verify(
        &self,
        refname: &str,
        _: Option<&str>,
        limit: Option<u64>,
    ) -> Result<LockList, ShellError> {
        assert_eq!((refname, limit), ("refs/heads/main", Some(7)));
        Ok(LockList {
            locks: vec![(bobs(), Some(true))],
            next_cursor: None,
        })
    }
    fn unlock(&self, id: &str, force: bool, _: Option<&str>) -> Result<LockInfo, ShellError> {
        match (id, force) {
            ("b0b", false) => Err(ShellError::Upstream {
                status: 403,
                message: "a b.psd is locked by bob, not by you (alice)".into(),
            }),
            ("b0b", true) => Ok(bobs()),
            _ => Err(ShellError::Upstream {
                status: 404,
                message: format!("there is no lock {id}"),
            }),
        }
    }
    fn user(&self) -> &str {
        "alice"
    }
}

#[test]
fn lock_answers_carry_the_lock_and_the_api_status() {
    let input = request(&[
        "lock",
        "path=a b.psd",
        "FLUSH",
        "list-lock",
        "path=a b.psd",
        "FLUSH",
        "list-locks", // git-lfs 3.3's verify
        "refname=refs/heads/main",
        "limit=7",
        "FLUSH",
        "unlock b0b",
        "FLUSH",
        "unlock b0b",
        "force=true",
        "FLUSH",
        "unlock nope",
        "FLUSH",
        "list-lock",
        "limit=x",
        "FLUSH",
    ]);
    let (out, result) = session_with(input, LfsOperation::Upload, &Held);
    result.unwrap();
    let text = |s: &str| String::from_utf8(pkt(&format!("{s}\n"))).unwrap();
    let args = [
        "id=b0b",
        "path=a b.psd",
        "locked-at=2026-01-02T03:04:05Z",
        "ownername=bob",
    ]
    .map(text)
    .concat();
    let lines = |owner: &str| {
        [
            "lock b0b".to_string(),
            "path b0b a b.psd".into(),
            "locked-at b0b 2026-01-02T03:04:05Z".into(),
            "ownername b0b bob".into(),
            format!("owner b0b {owner}"),
        ]
        .map(|l| text(&l))
        .concat()
    };
    let expected = [
        "000eversion=1\n000clocking\n0000".to_string(),
        text("status 409"),
        args.clone(),
        "0001".into(),
        text("a b.psd is already locked by bob"),
        "0000".into(),
        text("status 200"),
        text("next-cursor=c1"),
        "0001".into(),
        lines("theirs"),
        "0000".into(),
        text("status 200"),
        "0001".into(),
        lines("ours"),
        "0000".into(),
        text("status 403"),
        "0001".into(),
        text("a b.psd is locked by bob, not by you (alice)"),
        "0000".into(),
        text("status 200"),
        args,
        "0000".into(),
        text("status 404"),
        "0001".into(),
        text("there is no lock nope"),
        "0000".into(),
        text("status 400"),
        "0001".into(),
        text("invalid limit \"x\""),
        "0000".into(),
    ]
    .concat();
    assert_eq!(out, expected);
    // A download session lists locks but never takes or removes one.
    let input = request(&["lock", "path=a b.psd", "FLUSH", "unlock b0b", "FLUSH"]);
    let (out, result) = session_with(input, LfsOperation::Download, &Held);
    result.unwrap();
    assert_eq!(out.matches("status 405").count(), 2, "{out}");
}
