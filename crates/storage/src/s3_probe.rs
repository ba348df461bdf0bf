//! The check an S3 object store gets when a server (or an admin command) opens it: one
//! LIST of the prefix, with short timeouts and one retry, so that a missing bucket, refused
//! credentials or an unreachable endpoint stop the start within seconds with a message that
//! says what to fix, instead of failing the first upload after minutes of retries.

use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::client::{HttpError, HttpErrorKind};
use object_store::path::Path as S3Path;
use object_store::{BackoffConfig, ClientConfigKey, ObjectStore as _, RetryConfig};

/// Bounds of the probe's requests (the store's own client keeps `object_store`'s defaults).
const CONNECT_TIMEOUT: &str = "3s";
const REQUEST_TIMEOUT: &str = "10s";
const RETRIES: usize = 1;
/// The whole probe, credential lookups included.
const DEADLINE: Duration = Duration::from_secs(20);
/// A key never stored: its HEAD tells a missing bucket (404) from refused credentials (403).
const ABSENT_KEY: &str = ".git-xet-probe";

/// Why the object store is not usable. Each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum S3ProbeError {
    #[error(
        "--object-store s3://{bucket}: the bucket does not exist at {endpoint}: create it (e.g. \
         `garage bucket create {bucket}` or `aws s3 mb s3://{bucket}`) and allow this key on it, \
         or fix the bucket name"
    )]
    NoBucket { bucket: String, endpoint: String },
    #[error(
        "--object-store s3://{bucket}: {endpoint} refused the credentials: check \
         AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and that this key may list, read and \
         write the bucket ({detail})"
    )]
    Refused {
        bucket: String,
        endpoint: String,
        detail: String,
    },
    #[error(
        "--object-store s3://{bucket}: cannot reach the object store at {endpoint}: check \
         AWS_ENDPOINT_URL (and AWS_ALLOW_HTTP=true for an http:// endpoint) and that the store \
         is running ({detail})"
    )]
    Unreachable {
        bucket: String,
        endpoint: String,
        detail: String,
    },
    #[error(
        "--object-store s3://{bucket}: {endpoint} gave no answer within {}s: check \
         AWS_ENDPOINT_URL and the network to it", DEADLINE.as_secs()
    )]
    TimedOut { bucket: String, endpoint: String },
    #[error(
        "--object-store s3://{bucket}: the endpoint {endpoint} is plain http, which the client \
         refuses unless AWS_ALLOW_HTTP=true: set it (or use an https:// endpoint)"
    )]
    PlainHttp { bucket: String, endpoint: String },
    #[error("--object-store s3://{bucket}: listing it at {endpoint} failed: {detail}")]
    Failed {
        bucket: String,
        endpoint: String,
        detail: String,
    },
    #[error("--object-store s3://{bucket}: {context}: {detail}")]
    Setup {
        bucket: String,
        context: &'static str,
        detail: String,
    },
}

/// Lists one level under `prefix` in the bucket `builder` names, and tells why it failed.
/// Its requests run on the process's runtime ([`git_xet_io::runtime::wait`]), so it may be
/// called from anywhere (a plain thread, or a blocking section of the server's runtime).
pub fn probe(builder: &AmazonS3Builder, prefix: &str) -> Result<(), S3ProbeError> {
    let bucket = builder
        .get_config_value(&AmazonS3ConfigKey::Bucket)
        .unwrap_or_default();
    let endpoint = builder
        .get_config_value(&AmazonS3ConfigKey::Endpoint)
        .unwrap_or_else(|| {
            let region = builder
                .get_config_value(&AmazonS3ConfigKey::Region)
                .unwrap_or_else(|| "us-east-1".into());
            format!("AWS S3 ({region})")
        });
    let allow_http = builder
        .get_config_value(&AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp))
        // The values `object_store` reads as true.
        .is_some_and(|v| {
            ["1", "true", "on", "yes", "y"]
                .iter()
                .any(|t| v.eq_ignore_ascii_case(t))
        });
    if endpoint.starts_with("http://") && !allow_http {
        return Err(S3ProbeError::PlainHttp { bucket, endpoint });
    }
    let setup = |context, detail: String| S3ProbeError::Setup {
        bucket: bucket.clone(),
        context,
        detail,
    };
    let s3 = builder
        .clone()
        .with_config(
            AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout),
            CONNECT_TIMEOUT,
        )
        .with_config(
            AmazonS3ConfigKey::Client(ClientConfigKey::Timeout),
            REQUEST_TIMEOUT,
        )
        .with_retry(RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_millis(500),
                base: 2.0,
            },
            max_retries: RETRIES,
            retry_timeout: Duration::from_secs(5),
        })
        .build()
        .map_err(|e| setup("configuring the client", e.to_string()))?;
    let prefix = S3Path::from(prefix.trim_matches('/'));
    let marker = S3Path::from(match prefix.as_ref() {
        "" => ABSENT_KEY.to_string(),
        p => format!("{p}/{ABSENT_KEY}"),
    });
    let check = async move {
        let listed = s3.list_with_delimiter(Some(&prefix)).await;
        let Err(list_error) = listed else {
            return Ok(());
        };
        if is_http_failure(&list_error) {
            return Err(Failure::Unreachable(list_error));
        }
        // A LIST failure carries no typed status; a HEAD's does.
        match s3.head(&marker).await {
            Err(object_store::Error::NotFound { .. }) => Err(Failure::NoBucket),
            // The LIST's answer says more (a HEAD's has no body).
            Err(
                object_store::Error::PermissionDenied { .. }
                | object_store::Error::Unauthenticated { .. },
            ) => Err(Failure::Refused(list_error)),
            Err(e) if is_http_failure(&e) => Err(Failure::Unreachable(e)),
            _ => Err(Failure::Other(list_error)),
        }
    };
    let runtime = git_xet_io::runtime::handle()
        .map_err(|e| setup("starting the async runtime", e.to_string()))?;
    // The deadline's timer is made on the runtime (it needs one), hence the async block.
    let deadline = async move { tokio::time::timeout(DEADLINE, check).await };
    let outcome = git_xet_io::runtime::wait(runtime.spawn(deadline))
        .map_err(|e| setup("running the probe", e.to_string()))?;
    let (bucket, endpoint) = (bucket.clone(), endpoint);
    match outcome {
        Ok(Ok(())) => Ok(()),
        Ok(Err(Failure::NoBucket)) => Err(S3ProbeError::NoBucket { bucket, endpoint }),
        Ok(Err(Failure::Refused(e))) => Err(S3ProbeError::Refused {
            bucket,
            endpoint,
            detail: root_cause(&e),
        }),
        Ok(Err(Failure::Unreachable(e))) => Err(S3ProbeError::Unreachable {
            bucket,
            endpoint,
            detail: root_cause(&e),
        }),
        Ok(Err(Failure::Other(e))) => Err(S3ProbeError::Failed {
            bucket,
            endpoint,
            detail: root_cause(&e),
        }),
        Err(_elapsed) => Err(S3ProbeError::TimedOut { bucket, endpoint }),
    }
}

enum Failure {
    NoBucket,
    Refused(object_store::Error),
    Unreachable(object_store::Error),
    Other(object_store::Error),
}

/// The innermost error of `e`'s chain (the transport's, or the store's answer), which says
/// what happened without the layers' repetitions; cut to a line's length.
fn root_cause(e: &object_store::Error) -> String {
    let text = git_xet_io::error_chain::innermost(e).unwrap_or_else(|| e.to_string());
    match text.char_indices().nth(300) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text,
    }
}

/// Whether the request never got an HTTP answer (connection refused, DNS, timeout, TLS):
/// found by type in the error's source chain, which holds the transport's error.
fn is_http_failure(e: &object_store::Error) -> bool {
    git_xet_io::error_chain::causes(e).any(|err| {
        err.downcast_ref::<HttpError>().is_some_and(|h| {
            matches!(
                h.kind(),
                HttpErrorKind::Connect
                    | HttpErrorKind::Timeout
                    | HttpErrorKind::Request
                    | HttpErrorKind::Interrupted
            )
        }) || err
            .downcast_ref::<reqwest::Error>()
            .is_some_and(|r| r.is_connect() || r.is_timeout() || r.is_request())
            || err.downcast_ref::<std::io::Error>().is_some()
    })
}
