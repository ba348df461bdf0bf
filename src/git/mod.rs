//! git integration: repository discovery, git config (install/uninstall), credentials,
//! migration of LFS repositories, status, and server-side hooks.
