//! `POST <repo>/info/lfs/objects/batch`.
//!
//! Offers the `xet` transfer when the client lists it (and the server is not `--basic-only`),
//! with the action shape of the deployed convention: `href` is a token-refresh URL and the
//! headers carry the CAS URL, a CAS token and its expiry, a session id and, for downloads,
//! the object's XET file hash. Otherwise `basic`, with this server's object URLs. Object
//! existence is per repository.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::http::HeaderMap;
use axum::response::Response;

use crate::body::{read_limited, ANONYMOUS_BODY_MAX};
use crate::error::ServerError;
use crate::lfs::objects::{claim_statuses, Claim};
use crate::lfs::{lfs_base, lfs_json, parse_oid, LfsResult};
use crate::state::{blocking, SharedState};
use git_xet_core::api::cas::AnnouncedObject;
use git_xet_core::api::routes;
use git_xet_core::constants::{XET_DOWNLOAD_TRANSFER, XET_TRANSFER};
use git_xet_core::lfs;
use git_xet_core::lfs::batch::{
    Action, BatchRequest, BatchResponse, ObjectError, ObjectResponse, Operation, HASH_ALGO_SHA256,
};
use git_xet_identity::auth::Scope;
use git_xet_index::RepoName;

const MAX_BATCH_BODY: usize = 16 * 1024 * 1024;
const MAX_OBJECTS: usize = 10_000;
/// The first this many upload actions of an answer carry its object list
/// ([`lfs::HEADER_UPLOAD_OBJECTS`]): git-lfs hands objects to its agents in the answer's
/// order, and whichever of them reaches the agents' coordinator first should bring it.
const LIST_CARRIERS: usize = 4;

/// What the index says about one requested object.
enum Known {
    Invalid(String),
    Missing,
    Present { size: u64, file_hash: String },
}

/// What the index says about each requested object: one query for all objects, one for
/// the claims of those found (a push asks about 100 objects per request).
fn known_objects(
    index: &dyn git_xet_index::Index,
    repo: &RepoName,
    lookups: &[(String, i64)],
) -> Result<Vec<Known>, ServerError> {
    let mut out: Vec<Known> = Vec::with_capacity(lookups.len());
    // (position in `out`, sha256) of the well-formed requests.
    let mut asked = Vec::with_capacity(lookups.len());
    for (oid, size) in lookups {
        if *size < 0 {
            out.push(Known::Invalid(format!("invalid size {size}")));
            continue;
        }
        match parse_oid(oid) {
            Ok(sha256) => {
                asked.push((out.len(), sha256));
                out.push(Known::Missing);
            }
            Err(e) => out.push(Known::Invalid(e.to_string())),
        }
    }
    let sha256s: Vec<[u8; 32]> = asked.iter().map(|a| a.1).collect();
    let found = index.repo_files_by_sha256(repo, &sha256s)?;
    let records: Vec<(usize, git_xet_index::FileRecord)> = asked
        .iter()
        .zip(found)
        .filter_map(|((at, _), f)| f.map(|f| (*at, f)))
        .collect();
    let files: Vec<&git_xet_index::FileRecord> = records.iter().map(|r| &r.1).collect();
    // A claim already known false is dropped here, so the object can be sent again.
    let claims = claim_statuses(index, repo, &files)?;
    for ((at, f), claim) in records.iter().zip(claims) {
        if claim != Claim::False {
            out[*at] = Known::Present {
                size: f.size,
                file_hash: f.file_hash.to_hex(),
            };
        }
    }
    Ok(out)
}

/// Parses and checks a batch request body; returns it and whether it is an upload.
pub fn parse_request(bytes: &[u8]) -> Result<(BatchRequest, bool), ServerError> {
    let request: BatchRequest = serde_json::from_slice(bytes)
        .map_err(|e| ServerError::bad_request(format!("malformed batch request: {e}")))?;
    // An unknown operation is a parse error that names it.
    let upload = request.operation == Operation::Upload;
    if request
        .hash_algo
        .as_deref()
        .is_some_and(|a| a != HASH_ALGO_SHA256)
    {
        return Err(ServerError::Conflict(
            "only the sha256 hash algorithm is supported".into(),
        ));
    }
    if request.objects.len() > MAX_OBJECTS {
        return Err(ServerError::PayloadTooLarge(format!(
            "at most {MAX_OBJECTS} objects per batch"
        )));
    }
    Ok((request, upload))
}

pub async fn batch(
    state: &SharedState,
    repo: &RepoName,
    headers: &HeaderMap,
    body: Body,
) -> LfsResult<Response> {
    // Authorized before the body is read: without a credential, only `--anonymous-read`
    // gets that far, and then with a small body.
    let reader = state.authorize_repo(headers, repo, Scope::Read)?;
    let max = match reader.anonymous {
        true => ANONYMOUS_BODY_MAX,
        false => MAX_BATCH_BODY,
    };
    let bytes = read_limited(body, headers, max, "batch request").await?;
    let (request, upload) = parse_request(&bytes)?;
    let scope = if upload { Scope::Write } else { Scope::Read };
    let access = match upload {
        true => state.authorize_repo(headers, repo, scope)?,
        false => reader,
    };
    let lists = |name: &str| request.transfers.iter().any(|t| t == name);
    // A download goes to `xet` only when the client's `xet` agent can download: Hugging
    // Face's agent, also registered as `xet`, refuses at init, and its users must get
    // `basic` (docs/protocol.md, "Transfer negotiation").
    let xet =
        !state.config.basic_only && lists(XET_TRANSFER) && (upload || lists(XET_DOWNLOAD_TRANSFER));
    let offers_basic =
        request.transfers.is_empty() || request.transfers.iter().any(|t| t == "basic");

    let specs: Vec<(String, i64)> = request
        .objects
        .into_iter()
        .map(|o| (o.oid, o.size))
        .collect();
    let index = state.index.clone();
    let owned_repo = repo.clone();
    let lookups: Vec<(String, i64)> = specs.clone();
    let known = blocking(move || known_objects(&*index, &owned_repo, &lookups)).await?;

    let base = state.base_url(headers);
    let lfs = lfs_base(&base, repo);
    let max_object_size = state.config.max_object_size;
    let (token, exp) = state.mint_token(repo, scope, &access);
    let token_id = access
        .holder
        .as_ref()
        .map(|h| h.id.clone())
        .unwrap_or_default();
    let expires_in = state
        .config
        .cas_token_ttl
        .as_secs()
        .saturating_sub(60)
        .max(30);
    let expires_in = Some(i64::try_from(expires_in).unwrap_or(i64::MAX));
    let session = format!(
        "{:016x}{:016x}",
        rand::random::<u64>(),
        rand::random::<u64>()
    );
    let auth_header = BTreeMap::from([("Authorization".to_string(), format!("Bearer {token}"))]);
    let mut xet_headers = BTreeMap::from([
        (
            lfs::HEADER_CAS_URL.to_string(),
            state.cas_url(headers, repo),
        ),
        (lfs::HEADER_ACCESS_TOKEN.to_string(), token.clone()),
        (lfs::HEADER_TOKEN_EXPIRATION.to_string(), exp.to_string()),
        (lfs::HEADER_SESSION_ID.to_string(), session.clone()),
    ]);
    if upload && crate::cas::xorb_waits::enabled(state) {
        // Said up front, so that a client's first shard can go with its xorbs.
        xet_headers.insert(
            lfs::HEADER_AWAIT_XORBS_LIMIT.to_string(),
            crate::cas::xorb_waits::MAX_AWAITED.to_string(),
        );
    }
    let token_route = if upload {
        routes::LFS_XET_WRITE_TOKEN
    } else {
        routes::LFS_XET_READ_TOKEN
    };
    let token_href = format!("{lfs}/{token_route}");
    let verify = Action {
        href: format!("{lfs}/{}", routes::LFS_VERIFY),
        header: auth_header.clone(),
        expires_in,
        expires_at: None,
    };

    let mut objects: Vec<ObjectResponse> = specs
        .into_iter()
        .zip(known)
        .map(|((oid, size), known)| {
            let mut answer = ObjectResponse {
                oid,
                size,
                authenticated: None,
                actions: BTreeMap::new(),
                error: None,
            };
            let error = |code: u32, message: String| Some(ObjectError { code, message });
            match (known, upload) {
                (Known::Invalid(message), _) => answer.error = error(422, message),
                (Known::Present { size: stored, .. }, _) if stored != size as u64 => {
                    answer.error = error(
                        422,
                        format!("object is stored with {stored} bytes, not {size}"),
                    );
                }
                (Known::Present { .. }, true) => {} // already there: nothing to upload
                (Known::Missing, false) => {
                    answer.error = error(
                        404,
                        format!("object {} is not stored in {repo}", answer.oid),
                    );
                }
                (Known::Missing, true) if !xet && size as u64 > max_object_size => {
                    answer.error = error(
                        422,
                        format!(
                            "object is larger than this server accepts ({max_object_size} bytes)"
                        ),
                    );
                }
                (Known::Missing, true) => {
                    answer.authenticated = Some(true);
                    let action = if xet {
                        Action {
                            href: token_href.clone(),
                            header: xet_headers.clone(),
                            expires_in,
                            expires_at: None,
                        }
                    } else {
                        // Signed too: huggingface_hub PUTs to the href without the header.
                        let grant = git_xet_identity::signing::UploadGrant {
                            repo: repo.to_string(),
                            oid: answer.oid.clone(),
                            token_id: token_id.clone(),
                            expires: exp,
                        };
                        Action {
                            href: format!(
                                "{lfs}/{}{}?{}",
                                routes::LFS_OBJECTS,
                                answer.oid,
                                grant.query(&state.keys)
                            ),
                            header: auth_header.clone(),
                            expires_in,
                            expires_at: None,
                        }
                    };
                    answer.actions.insert("upload".into(), action);
                    // An xet upload is complete only once its shard registered the file
                    // here, which the agent waits for: a verify request would cost every
                    // object one more round trip (and git-lfs a new connection) to learn
                    // nothing.
                    if !xet {
                        answer.actions.insert("verify".into(), verify.clone());
                    }
                }
                (Known::Present { file_hash, .. }, false) => {
                    answer.authenticated = Some(true);
                    let action = if xet {
                        let mut header = xet_headers.clone();
                        header.insert(lfs::HEADER_FILE_HASH.to_string(), file_hash);
                        Action {
                            href: token_href.clone(),
                            header,
                            expires_in,
                            expires_at: None,
                        }
                    } else {
                        Action {
                            href: format!("{lfs}/{}{}", routes::LFS_OBJECTS, answer.oid),
                            header: auth_header.clone(),
                            expires_in,
                            expires_at: None,
                        }
                    };
                    answer.actions.insert("download".into(), action);
                }
            }
            answer
        })
        .collect();
    // git-lfs starts the named transfer's agents (with `concurrent`, one process per worker,
    // one after the other) even when no object has an action, as for a `git push` of objects
    // the server already has: then name `basic`, which runs inside git-lfs and costs nothing.
    // Only for uploads: a download batch (without actions, errors only) is also how clients
    // ask which transfer the server offers.
    if upload && xet {
        // For the agent that reads ahead of git-lfs (cas/upload_batches.rs).
        let announced: Vec<AnnouncedObject> = objects
            .iter()
            .filter(|o| o.actions.contains_key("upload"))
            .filter_map(|o| {
                Some(AnnouncedObject {
                    oid: o.oid.clone(),
                    size: u64::try_from(o.size).ok()?,
                })
            })
            .collect();
        if announced.len() > 1 {
            // The list goes with the answer too, saving the agent's coordinator the round
            // trip of asking for it (docs/server-api.md, "Read-ahead of a push's objects").
            let listed = &announced[..announced.len().min(lfs::MAX_UPLOAD_OBJECTS)];
            let list = lfs::format_upload_objects(listed);
            for action in objects
                .iter_mut()
                .filter_map(|o| o.actions.get_mut("upload"))
                .take(LIST_CARRIERS)
            {
                action
                    .header
                    .insert(lfs::HEADER_UPLOAD_OBJECTS.to_string(), list.clone());
            }
        }
        state.upload_batches.remember(&session, repo, announced);
    }
    let nothing_to_upload = upload && objects.iter().all(|o| o.actions.is_empty());
    let transfer = if xet && !(nothing_to_upload && offers_basic) {
        XET_TRANSFER
    } else {
        "basic"
    };
    Ok(lfs_json(&BatchResponse {
        transfer: Some(transfer.into()),
        objects,
        hash_algo: Some(HASH_ALGO_SHA256.into()),
    }))
}
