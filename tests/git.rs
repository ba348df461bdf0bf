//! git integration end to end: real git, real git-lfs, the real `git-xet` binary and a real
//! `git xet server` on loopback. Every test runs with its own HOME and git config files, so
//! the developer's configuration is never read or touched.

mod support;

#[path = "git/commands.rs"]
mod commands;
#[path = "git/compat_harness.rs"]
mod compat_harness;
#[path = "git/compat_http.rs"]
mod compat_http;
#[path = "git/env.rs"]
mod env;
#[path = "git/failures.rs"]
mod failures;
#[path = "git/filter.rs"]
mod filter;

#[path = "git/filter_protocol.rs"]
mod filter_protocol;
#[path = "git/import_lfs.rs"]
mod import_lfs;
#[path = "git/import_lfs_s3.rs"]
mod import_lfs_s3;
#[path = "git/install.rs"]
mod install;
#[path = "git/insteadof.rs"]
mod insteadof;
#[path = "git/manpages.rs"]
mod manpages;
#[path = "git/many_small.rs"]
mod many_small;
#[path = "git/matrix.rs"]
mod matrix;
#[path = "git/migrate.rs"]
mod migrate;
#[path = "git/migrate_endpoints.rs"]
mod migrate_endpoints;
#[path = "git/mount.rs"]
mod mount;
#[path = "git/mount_mmap.rs"]
mod mount_mmap;
#[path = "git/mount_more.rs"]
mod mount_more;
#[path = "git/mount_store.rs"]
mod mount_store;
#[path = "git/multi_process.rs"]
mod multi_process;
#[path = "git/old_lfs.rs"]
mod old_lfs;
#[path = "git/prompt.rs"]
mod prompt;

#[path = "git/request_ids.rs"]
mod request_ids;
#[path = "git/shared_uploads.rs"]
mod shared_uploads;
#[path = "git/shared_uploads_proxy.rs"]
mod shared_uploads_proxy;
#[path = "git/shared_uploads_read_ahead.rs"]
mod shared_uploads_read_ahead;
#[path = "git/ssh_auth.rs"]
mod ssh_auth;
#[path = "git/ssh_postgres.rs"]
mod ssh_postgres;
#[path = "git/ssh_revoke.rs"]
mod ssh_revoke;
#[path = "git/ssh_shell.rs"]
mod ssh_shell;
#[path = "git/ssh_shell_locks.rs"]
mod ssh_shell_locks;
#[path = "git/sshd.rs"]
mod sshd;
#[path = "git/status_page.rs"]
mod status_page;
#[path = "git/store.rs"]
mod store;
#[path = "git/store_fs.rs"]
mod store_fs;
#[path = "git/store_lfs_commands.rs"]
mod store_lfs_commands;
#[path = "git/tls_native.rs"]
mod tls_native;
#[path = "git/transfer_protocol.rs"]
mod transfer_protocol;
#[path = "git/trusted_proxy.rs"]
mod trusted_proxy;
#[path = "git/upkeep.rs"]
mod upkeep;
#[path = "git/web_listing.rs"]
mod web_listing;
#[path = "git/web_pages.rs"]
mod web_pages;
#[path = "git/web_requests.rs"]
mod web_requests;
#[path = "git/workflow.rs"]
mod workflow;
