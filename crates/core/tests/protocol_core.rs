//! Protocol core: test vectors, deployed reference files, properties, and rejection of
//! malformed input.

#[path = "support/random.rs"]
mod random;
#[path = "support/xorbs.rs"]
mod xorbs;

#[path = "protocol_core/common.rs"]
mod common;
#[path = "protocol_core/deployed_client.rs"]
mod deployed_client;
#[path = "protocol_core/properties.rs"]
mod properties;
#[path = "protocol_core/rejection.rs"]
mod rejection;
#[path = "protocol_core/streamed_check.rs"]
mod streamed_check;
#[path = "protocol_core/vectors.rs"]
mod vectors;
