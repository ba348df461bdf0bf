//! git-lfs integration: the custom transfer protocol (line-delimited JSON on stdin/stdout)
//! and LFS pointer files. Drives the client layer.
