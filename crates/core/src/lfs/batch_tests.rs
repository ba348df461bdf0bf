//! The Batch API types against the examples of git-lfs's docs/api/batch.md (copied without
//! their comment lines) and against the exact bytes this project's client, ssh relay and
//! server have always written.

use super::*;

fn spec(oid: &str, size: i64) -> ObjectSpec {
    ObjectSpec {
        oid: oid.into(),
        size,
    }
}

fn basic() -> Vec<String> {
    vec!["basic".to_string()]
}

#[test]
fn the_documented_requests_parse() {
    let with_ref = r#"{
      "operation": "download",
      "transfers": [ "basic" ],
      "ref": { "name": "refs/heads/main" },
      "objects": [
        {
          "oid": "12345678",
          "size": 123
        }
      ],
      "hash_algo": "sha256"
    }"#;
    let request: BatchRequest = serde_json::from_str(with_ref).unwrap();
    assert_eq!(
        request,
        BatchRequest {
            operation: Operation::Download,
            transfers: basic(),
            objects: vec![spec("12345678", 123)],
            refspec: Some(Ref {
                name: "refs/heads/main".into()
            }),
            hash_algo: Some(HASH_ALGO_SHA256.into()),
        }
    );

    let upload = r#"{
      "operation": "upload",
      "transfers": [ "basic" ],
      "objects": [
        {
          "oid": "12345678",
          "size": 123
        }
      ]
    }"#;
    let request: BatchRequest = serde_json::from_str(upload).unwrap();
    assert_eq!(request.operation, Operation::Upload);
    assert_eq!(request.refspec, None);
    assert_eq!(request.hash_algo, None);
    assert_eq!(request.objects, vec![spec("12345678", 123)]);

    // "servers should be able to operate with a missing or null `ref` property";
    // `transfers` may be omitted (then `basic` is meant).
    let minimal = r#"{"operation":"upload","ref":null,"objects":[]}"#;
    let request: BatchRequest = serde_json::from_str(minimal).unwrap();
    assert_eq!(request.refspec, None);
    assert!(request.transfers.is_empty());
}

#[test]
fn requests_are_written_as_before() {
    let oid = "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393";
    // The client's request (no ref).
    let client = BatchRequest {
        operation: Operation::Download,
        transfers: vec!["xet".into(), "basic".into(), "xet-download".into()],
        objects: vec![spec(oid, 5)],
        refspec: None,
        hash_algo: Some(HASH_ALGO_SHA256.into()),
    };
    assert_eq!(
        serde_json::to_string(&client).unwrap(),
        format!(
            r#"{{"operation":"download","transfers":["xet","basic","xet-download"],"objects":[{{"oid":"{oid}","size":5}}],"hash_algo":"sha256"}}"#
        )
    );
    // The ssh relay's request, with the ref git-lfs-transfer named.
    let relay = BatchRequest {
        operation: Operation::Upload,
        transfers: basic(),
        objects: vec![spec(oid, 0)],
        refspec: Some(Ref {
            name: "refs/heads/main".into(),
        }),
        hash_algo: Some(HASH_ALGO_SHA256.into()),
    };
    let written = serde_json::to_string(&relay).unwrap();
    assert_eq!(
        written,
        format!(
            r#"{{"operation":"upload","transfers":["basic"],"objects":[{{"oid":"{oid}","size":0}}],"ref":{{"name":"refs/heads/main"}},"hash_algo":"sha256"}}"#
        )
    );
    assert_eq!(
        serde_json::from_str::<BatchRequest>(&written).unwrap(),
        relay
    );
}

#[test]
fn bad_requests_say_what_is_wrong() {
    let error = |json: &str| {
        serde_json::from_str::<BatchRequest>(json)
            .unwrap_err()
            .to_string()
    };
    let unknown = error(r#"{"operation":"delete","objects":[]}"#);
    assert!(
        unknown.contains(r#"unknown operation "delete""#),
        "{unknown}"
    );
    let missing = error(r#"{"operation":"upload"}"#);
    assert!(missing.contains("missing field `objects`"), "{missing}");
    let no_size = error(r#"{"operation":"upload","objects":[{"oid":"ab"}]}"#);
    assert!(no_size.contains("missing field `size`"), "{no_size}");
    let not_int = error(r#"{"operation":"upload","objects":[{"oid":"ab","size":"1"}]}"#);
    assert!(not_int.contains("invalid type"), "{not_int}");
    assert!(error("{").contains("EOF"));
    // A long unknown operation is shown cut short.
    let long = error(&format!(
        r#"{{"operation":"{}","objects":[]}}"#,
        "x".repeat(10_000)
    ));
    assert!(long.len() < 300, "{}", long.len());
    // Negative sizes parse: the server answers them per object.
    let negative: BatchRequest =
        serde_json::from_str(r#"{"operation":"upload","objects":[{"oid":"ab","size":-1}]}"#)
            .unwrap();
    assert_eq!(negative.objects[0].size, -1);
}

#[test]
fn the_documented_responses_parse() {
    let download = r#"{
      "transfer": "basic",
      "objects": [
        {
          "oid": "1111111",
          "size": 123,
          "authenticated": true,
          "actions": {
            "download": {
              "href": "https://some-download.com",
              "header": {
                "Key": "value"
              },
              "expires_at": "2016-11-10T15:29:07Z"
            }
          }
        }
      ],
      "hash_algo": "sha256"
    }"#;
    let response: BatchResponse = serde_json::from_str(download).unwrap();
    let action = Action {
        href: "https://some-download.com".into(),
        header: BTreeMap::from([("Key".to_string(), "value".to_string())]),
        expires_in: None,
        expires_at: Some("2016-11-10T15:29:07Z".into()),
    };
    assert_eq!(
        response,
        BatchResponse {
            transfer: Some("basic".into()),
            objects: vec![ObjectResponse {
                oid: "1111111".into(),
                size: 123,
                authenticated: Some(true),
                actions: BTreeMap::from([("download".to_string(), action)]),
                error: None,
            }],
            hash_algo: Some(HASH_ALGO_SHA256.into()),
        }
    );

    let missing = r#"{
      "transfer": "basic",
      "objects": [
        {
          "oid": "1111111",
          "size": 123,
          "error": {
            "code": 404,
            "message": "Object does not exist"
          }
        }
      ],
      "hash_algo": "sha256"
    }"#;
    let response: BatchResponse = serde_json::from_str(missing).unwrap();
    let object = &response.objects[0];
    assert!(object.actions.is_empty());
    assert_eq!(
        object.error,
        Some(ObjectError {
            code: 404,
            message: "Object does not exist".into()
        })
    );
}

#[test]
fn responses_are_read_as_leniently_as_git_lfs_does() {
    // No `transfer` (then `basic`), no size, `null` actions, an action without header.
    let sparse = r#"{"objects":[{"oid":"a","actions":null},
        {"oid":"b","actions":{"upload":{"href":"h","expires_in":-5}},"error":{}}]}"#;
    let response: BatchResponse = serde_json::from_str(sparse).unwrap();
    assert_eq!(response.transfer, None);
    assert_eq!(response.hash_algo, None);
    assert_eq!(response.objects[0].size, 0);
    assert!(response.objects[0].actions.is_empty());
    let upload = &response.objects[1].actions["upload"];
    assert_eq!((upload.href.as_str(), upload.expires_in), ("h", Some(-5)));
    assert!(upload.header.is_empty());
    assert_eq!(response.objects[1].error, Some(ObjectError::default()));
    // `{}` is an answer with no objects; an object needs its oid.
    assert_eq!(
        serde_json::from_str::<BatchResponse>("{}").unwrap(),
        BatchResponse::default()
    );
    let no_oid = serde_json::from_str::<BatchResponse>(r#"{"objects":[{"size":1}]}"#);
    assert!(no_oid
        .unwrap_err()
        .to_string()
        .contains("missing field `oid`"));
}

#[test]
fn responses_are_written_as_before() {
    // The server's shapes: an upload with its verify action, an object already there (no
    // actions at all), an error; `expires_at` is never written when unset.
    let action = |href: &str| Action {
        href: href.into(),
        header: BTreeMap::from([("Authorization".to_string(), "Bearer t".to_string())]),
        expires_in: Some(3540),
        expires_at: None,
    };
    let response = BatchResponse {
        transfer: Some("basic".into()),
        objects: vec![
            ObjectResponse {
                oid: "a".into(),
                size: 1,
                authenticated: Some(true),
                actions: BTreeMap::from([
                    ("verify".to_string(), action("v")),
                    ("upload".to_string(), action("u")),
                ]),
                error: None,
            },
            ObjectResponse {
                oid: "b".into(),
                size: 2,
                ..ObjectResponse::default()
            },
            ObjectResponse {
                oid: "c".into(),
                size: -1,
                error: Some(ObjectError {
                    code: 422,
                    message: "invalid size -1".into(),
                }),
                ..ObjectResponse::default()
            },
        ],
        hash_algo: Some(HASH_ALGO_SHA256.into()),
    };
    let written = serde_json::to_string(&response).unwrap();
    let auth = r#""header":{"Authorization":"Bearer t"},"expires_in":3540"#;
    assert_eq!(
        written,
        format!(
            r#"{{"transfer":"basic","objects":[{{"oid":"a","size":1,"authenticated":true,"actions":{{"upload":{{"href":"u",{auth}}},"verify":{{"href":"v",{auth}}}}}}},{{"oid":"b","size":2}},{{"oid":"c","size":-1,"error":{{"code":422,"message":"invalid size -1"}}}}],"hash_algo":"sha256"}}"#
        )
    );
    assert_eq!(
        serde_json::from_str::<BatchResponse>(&written).unwrap(),
        response
    );
    // An action without headers leaves `header` out.
    let bare = Action {
        href: "h".into(),
        ..Action::default()
    };
    assert_eq!(serde_json::to_string(&bare).unwrap(), r#"{"href":"h"}"#);
}
