//! Interoperability with the real reference client, hf-xet from PyPI (pinned in
//! tests/interop/requirements.txt; `.ci/deps/10-hf-xet.sh` makes the venv), against the
//! real `git xet server` on loopback: both directions, hashes, ranges, dedup across clients,
//! git-lfs with an agent that behaves as Hugging Face's `git-xet` does, and the Hub API with
//! the real `huggingface_hub` (tests/interop/hub.rs).

mod support;

#[path = "interop/big.rs"]
mod big;
#[path = "interop/common.rs"]
mod common;
#[path = "server/gitenv.rs"]
mod gitenv;
#[path = "interop/hf_agent.rs"]
mod hf_agent;
#[path = "interop/hub.rs"]
mod hub;
#[path = "interop/hub_listing.rs"]
mod hub_listing;
#[path = "interop/hub_settings.rs"]
mod hub_settings;
#[path = "interop/s3.rs"]
mod s3;
#[path = "interop/scopes.rs"]
mod scopes;
#[path = "interop/transfers.rs"]
mod transfers;
