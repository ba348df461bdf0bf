//! Unit tests of the object service (kept apart: objects.rs is the service itself).

use super::*;
use crate::action::{
    HEADER_ACCESS_TOKEN, HEADER_CAS_URL, HEADER_FILE_HASH, HEADER_TOKEN_EXPIRATION,
};
use crate::batch::{BatchObject, ObjectError};
use crate::protocol::Action;

const ENDPOINT: &str = "https://h/info/lfs";

fn object(n: u8, action: Option<Action>, error: Option<ObjectError>) -> BatchObject {
    BatchObject {
        oid: Oid([n; 32]),
        size: 3,
        action,
        verify: None,
        error,
    }
}

fn xet_action() -> Action {
    let hash = git_xet_core::MerkleHash::from_bytes([9; 32]).to_hex();
    let header = [
        (HEADER_CAS_URL, "https://cas.example/"),
        (HEADER_ACCESS_TOKEN, "tok"),
        (HEADER_TOKEN_EXPIRATION, "4000000000"),
        (HEADER_FILE_HASH, hash.as_str()),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    Action {
        href: String::new(),
        header,
    }
}

/// A Batch API answer gives, per object, its typed download or the reason by kind.
#[test]
fn downloads_from_a_batch_answer_by_kind() {
    let refused = ObjectError {
        code: 404,
        message: "not found".into(),
    };
    let answer = BatchResponse {
        transfer: "xet".into(),
        objects: vec![
            object(1, Some(xet_action()), None),
            object(2, None, Some(refused)),
            object(3, None, None),
            object(4, Some(Action::default()), None),
        ],
    };
    let want = ObjectDownload::from_batch(&answer, ENDPOINT, Oid([1; 32]), 3).unwrap();
    assert_eq!(want.access.cas_url, "https://cas.example");
    assert_eq!(want.access.token_expiration, 4_000_000_000);
    assert!(want.access.file_hash.is_some());
    match ObjectDownload::from_batch(&answer, ENDPOINT, Oid([2; 32]), 3) {
        Err(LfsError::ObjectRefused(r)) => {
            assert_eq!(
                (r.code, r.oid, r.endpoint.as_str()),
                (404, Oid([2; 32]), ENDPOINT)
            )
        }
        other => panic!("{other:?}"),
    }
    for n in [3, 5] {
        assert!(matches!(
            ObjectDownload::from_batch(&answer, ENDPOINT, Oid([n; 32]), 3),
            Err(LfsError::NoDownload { oid, .. }) if oid == Oid([n; 32])
        ));
    }
    assert!(matches!(
        ObjectDownload::from_batch(&answer, ENDPOINT, Oid([4; 32]), 3),
        Err(LfsError::Action(_))
    ));
}
