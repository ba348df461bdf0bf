//! `git xet server` over real HTTP on loopback: the CAS API, the git-lfs Batch API and git
//! smart HTTP, with real git and git-lfs where they take part.

mod support;

#[path = "server/common.rs"]
mod common;

#[path = "server/cas_xorbs.rs"]
mod cas_xorbs;

#[path = "server/cas_shards.rs"]
mod cas_shards;

#[path = "server/shard_await.rs"]
mod shard_await;

#[path = "server/upload_batches.rs"]
mod upload_batches;

#[path = "server/cas_reconstruction.rs"]
mod cas_reconstruction;

#[path = "server/dedup.rs"]
mod dedup;

#[path = "server/dedup_scope.rs"]
mod dedup_scope;

#[path = "server/dedup_scope_figures.rs"]
mod dedup_scope_figures;

#[path = "server/durability.rs"]
mod durability;

#[path = "server/health.rs"]
mod health;

#[path = "server/systemd.rs"]
mod systemd;

#[path = "server/gitenv.rs"]
mod gitenv;

#[path = "server/lfs.rs"]
mod lfs;

#[path = "server/lfs_basic.rs"]
mod lfs_basic;

#[path = "server/lfs_many.rs"]
mod lfs_many;

#[path = "server/git.rs"]
mod git;

#[path = "server/ssh_relay.rs"]
mod ssh_relay;

#[path = "server/cas_deployed.rs"]
mod cas_deployed;

#[path = "server/integrity.rs"]
mod integrity;

#[path = "server/tokens.rs"]
mod tokens;

#[path = "server/org_tokens.rs"]
mod org_tokens;

#[path = "server/oidc.rs"]
mod oidc;

#[path = "server/slow_clients.rs"]
mod slow_clients;

#[path = "server/slow_handlers.rs"]
mod slow_handlers;

#[path = "server/oracle.rs"]
mod oracle;

#[path = "server/reconstruction_bounds.rs"]
mod reconstruction_bounds;

#[path = "server/hub_listing.rs"]
mod hub_listing;

#[path = "server/hardening.rs"]
mod hardening;

#[path = "server/s3.rs"]
mod s3;
#[path = "server/upkeep.rs"]
mod upkeep;

#[path = "server/metrics.rs"]
mod metrics;

#[path = "server/claims.rs"]
mod claims;
#[path = "server/engine_checks.rs"]
mod engine_checks;

#[path = "server/layouts.rs"]
mod layouts;
#[path = "server/locks.rs"]
mod locks;
#[path = "server/runtimes.rs"]
mod runtimes;

#[path = "server/backup.rs"]
mod backup;
#[path = "server/hostile.rs"]
mod hostile;
#[path = "server/hub_commit.rs"]
mod hub_commit;
#[path = "server/hub_locks.rs"]
mod hub_locks;
#[path = "server/isolation.rs"]
mod isolation;
#[path = "server/lock_paths.rs"]
mod lock_paths;
#[path = "server/push_safety.rs"]
mod push_safety;
#[path = "server/scope_files.rs"]
mod scope_files;
#[path = "server/tenancy.rs"]
mod tenancy;

#[path = "server/rebuild.rs"]
mod rebuild;
