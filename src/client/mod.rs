//! CAS client: HTTP with retries and tokens; deduplicating upload sessions; reconstructing
//! downloads; the local shard and chunk caches. Speaks only the CAS API, so it works with any
//! conforming XET server. Depends on the protocol core only.
