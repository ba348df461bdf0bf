//! State-machine tests: a scripted backend stands in for the XET client so that every
//! protocol path (including failures and panics) is exercised deterministically. The real
//! backend is covered end to end by tests/git.rs.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::*;

const OID_A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const OID_B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);
impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Behaviour keyed on the object: OID_A succeeds in 3 progress steps, OID_B fails; a size of
/// 666 panics.
#[derive(Default)]
struct Scripted {
    inits: Vec<InitRequest>,
    terminated: bool,
    dir: Option<tempfile::TempDir>,
}

impl TransferBackend for Scripted {
    fn init(&mut self, init: &InitRequest) -> Result<(), LfsError> {
        self.inits.push(init.clone());
        if init.remote == "unreachable" {
            return Err(LfsError::Setup(Arc::new(std::io::Error::other(
                "cannot reach the LFS server",
            ))));
        }
        self.dir = Some(tempfile::tempdir().unwrap());
        Ok(())
    }

    fn upload(&mut self, req: &TransferRequest, progress: &Progress) -> Result<(), LfsError> {
        self.act(req, progress)
    }

    fn download(
        &mut self,
        req: &TransferRequest,
        progress: &Progress,
    ) -> Result<PathBuf, LfsError> {
        self.act(req, progress)?;
        let path = self.dir.as_ref().unwrap().path().join(req.oid.to_hex());
        std::fs::write(&path, b"data").unwrap();
        Ok(path)
    }

    fn terminate(&mut self) {
        self.terminated = true;
    }
}

impl Scripted {
    fn act(&self, req: &TransferRequest, progress: &Progress) -> Result<(), LfsError> {
        if req.size == 666 {
            panic!("scripted panic");
        }
        if req.oid.to_hex() == OID_B {
            progress.set(1);
            return Err(LfsError::object_refused(
                "https://h/info/lfs".into(),
                req.oid,
                404,
                "server said no".into(),
            ));
        }
        for step in 1..=3 {
            progress.set(req.size * step / 4);
            std::thread::sleep(std::time::Duration::from_millis(110));
        }
        Ok(())
    }
}

fn session(lines: &[String]) -> (Vec<Value>, Ending, SessionStats, Scripted) {
    let mut backend = Scripted::default();
    let mut input = std::io::Cursor::new(
        lines
            .iter()
            .map(|l| format!("{l}\n"))
            .collect::<String>()
            .into_bytes(),
    );
    let out = Buffer::default();
    let (ending, stats) = run(&mut backend, &mut input, &AnswerSink::new(out.clone())).unwrap();
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let answers = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (answers, ending, stats, backend)
}

fn init(op: &str) -> String {
    format!(
        r#"{{"event":"init","operation":"{op}","remote":"origin","concurrent":true,"concurrenttransfers":8}}"#
    )
}

fn upload(oid: &str, size: u64) -> String {
    format!(
        r#"{{"event":"upload","oid":"{oid}","size":{size},"path":"/tmp/f","action":{{"href":"h","header":{{"X-Xet-Access-Token":"secret"}}}}}}"#
    )
}

fn download(oid: &str, size: u64) -> String {
    format!(r#"{{"event":"download","oid":"{oid}","size":{size},"action":{{"href":"h"}}}}"#)
}

const TERMINATE: &str = r#"{"event":"terminate"}"#;

fn completes(answers: &[Value]) -> Vec<&Value> {
    answers
        .iter()
        .filter(|a| a["event"] == "complete")
        .collect()
}

#[test]
fn a_normal_upload_session() {
    let (answers, ending, stats, backend) = session(&[
        init("upload"),
        upload(OID_A, 1000),
        upload(OID_A, 0),
        TERMINATE.into(),
    ]);
    assert_eq!(answers[0], serde_json::json!({}));
    assert_eq!(ending, Ending::Terminated);
    assert_eq!(
        stats,
        SessionStats {
            succeeded: 2,
            failed: 0,
            bad_requests: 0
        }
    );
    assert!(backend.terminated);
    assert_eq!(backend.inits[0].concurrent_transfers, 8);
    // Progress before each complete, the last one equal to the size.
    let first_complete = answers
        .iter()
        .position(|a| a["event"] == "complete")
        .unwrap();
    let progress: Vec<u64> = answers[1..first_complete]
        .iter()
        .map(|a| a["bytesSoFar"].as_u64().unwrap())
        .collect();
    assert!(progress.len() >= 2, "{answers:?}");
    assert_eq!(*progress.last().unwrap(), 1000);
    assert!(progress.windows(2).all(|w| w[0] < w[1]));
    let last_of_empty = &answers[answers.len() - 2];
    assert_eq!(
        (
            last_of_empty["event"].as_str(),
            last_of_empty["bytesSoFar"].as_u64()
        ),
        (Some("progress"), Some(0))
    );
    assert_eq!(completes(&answers).len(), 2);
    assert!(completes(&answers)
        .iter()
        .all(|c| c.get("error").is_none() && c.get("path").is_none()));
}

#[test]
fn a_download_answers_with_the_file_path() {
    let (answers, _, stats, _) = session(&[init("download"), download(OID_A, 4), TERMINATE.into()]);
    assert_eq!(stats.succeeded, 1);
    let done = completes(&answers)[0];
    assert_eq!(done["oid"], OID_A);
    assert!(done["path"].as_str().unwrap().ends_with(OID_A));
}

#[test]
fn a_failed_object_gets_code_2_and_the_session_goes_on() {
    let (answers, _, stats, _) = session(&[
        init("upload"),
        upload(OID_B, 10),
        upload(OID_A, 10),
        upload(OID_A, 666),
        upload(OID_A, 10),
        TERMINATE.into(),
    ]);
    assert_eq!(
        stats,
        SessionStats {
            succeeded: 2,
            failed: 2,
            bad_requests: 0
        }
    );
    let c = completes(&answers);
    assert_eq!(c[0]["error"]["code"], 2);
    assert_eq!(c[0]["oid"], OID_B);
    assert!(c[0]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("server said no"));
    assert!(c[1].get("error").is_none());
    assert!(c[2]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("scripted panic"));
    assert!(c[3].get("error").is_none());
}

#[test]
fn init_failure_answers_code_32() {
    let bad_init = r#"{"event":"init","operation":"upload","remote":"unreachable"}"#.to_string();
    let (answers, _, _, _) =
        session(&[bad_init, init("upload"), upload(OID_A, 1), TERMINATE.into()]);
    assert_eq!(answers[0]["error"]["code"], 32);
    assert!(answers[0]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("cannot reach"));
    // A later successful init starts the session.
    assert_eq!(answers[1], serde_json::json!({}));
    assert!(completes(&answers)[0].get("error").is_none());
}

#[test]
fn out_of_order_and_malformed_requests_are_answered_not_hung() {
    let lines = [
        upload(OID_A, 1),                                   // before init
        r#"{"event":"init","operation":"up"}"#.to_string(), // malformed init
        init("download"),
        init("download"), // twice
        upload(OID_A, 1), // wrong direction
        "this is not json".to_string(),
        format!(r#"{{"event":"download","oid":"{OID_A}"}}"#), // no size
        r#"{"event":"fly"}"#.to_string(),
        String::new(), // blank lines are skipped
        download(OID_A, 4),
        TERMINATE.into(),
    ];
    let (answers, ending, stats, _) = session(&lines);
    assert_eq!(ending, Ending::Terminated);
    assert_eq!(stats.bad_requests, 7);
    assert_eq!(stats.succeeded, 1);
    let msg = |i: usize| answers[i]["error"]["message"].as_str().unwrap().to_string();
    assert!(msg(0).contains("before `init`"), "{}", msg(0));
    assert_eq!(answers[1]["error"]["code"], 32);
    assert_eq!(answers[2], serde_json::json!({}));
    assert!(msg(3).contains("twice"));
    assert!(msg(4).contains("initialised for download"));
    assert!(msg(5).contains("not valid JSON"));
    assert_eq!(answers[6]["oid"], OID_A);
    assert!(msg(6).contains("missing `size`"));
    assert!(msg(7).contains("unknown event"));
    assert!(answers.last().unwrap()["path"].is_string());
}

#[test]
fn end_of_input_without_terminate_ends_the_session() {
    let (answers, ending, _, backend) = session(&[init("upload")]);
    assert_eq!(answers.len(), 1);
    assert_eq!(ending, Ending::InputClosed);
    assert!(!backend.terminated);
}

#[test]
fn tokens_are_redacted_from_logged_requests() {
    let logged = redact(&upload(OID_A, 1));
    assert!(!logged.contains("secret"));
    assert!(logged.contains("<redacted>"));
    assert!(!redact("garbage secret").contains("secret"));
}
