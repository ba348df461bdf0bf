//! `git xet server`: the CAS API, the git-lfs Batch API and git over smart HTTP, on storage
//! and index backends behind small traits. Depends on the protocol core only.
