//! `git xet mount` through real FUSE, and what it fetches: a cold sequential read fetches
//! every chunk once (adjacent ranges never fetch the chunk at their edge twice), and a
//! revision whose chunks the per-user chunk store holds is read with no server at all.

use std::process::Stdio;

use crate::env::{ok, remote_url, GitEnv};
use crate::mount::{fixture, have_fuse, mount, mount_foreground, XORB_SERVED};
use crate::mount_more::unmount;
use crate::support::{lfs_objects, random_bytes, write_file, TestServer};

#[test]
fn a_cold_sequential_read_fetches_every_chunk_once() {
    if !have_fuse() {
        return;
    }
    let f = fixture();
    let view = mount(&f, "view", &[]);
    let before = f.server.metric(XORB_SERVED);
    assert!(std::fs::read(view.0.join("weights/model.bin")).unwrap() == f.v2);
    assert!(std::fs::read(view.0.join("small.bin")).unwrap() == f.small);
    let mounted = f.server.metric(XORB_SERVED) - before;
    unmount(&f, &view);

    // What a whole download of the same files costs: a clone of HEAD by someone else
    // (own chunk cache and store), whose filter fetches each file in one go.
    let other = GitEnv::with_agent(&[]);
    let before = f.server.metric(XORB_SERVED);
    let remote = remote_url(&f.server, "org/models", "read");
    other.clone_ok(&remote, "whole");
    let whole = f.server.metric(XORB_SERVED) - before;
    assert!(whole >= (f.v2.len() + f.small.len()) as f64, "{whole}");
    assert_eq!(
        mounted, whole,
        "a sequential read through the mount fetches each chunk once, as a download does"
    );
}

#[test]
fn a_revision_whose_chunks_the_store_holds_is_read_with_the_server_stopped() {
    if !have_fuse() {
        return;
    }
    let mut server = TestServer::start();
    let remote = remote_url(&server, "org/models", "write");
    let alice = GitEnv::with_agent(&[]);
    let bob = GitEnv::with_agent(&[]);
    let a = alice.lfs_repo("a", &remote);
    let v1 = random_bytes(5 << 20, 21);
    write_file(&a.join("model.bin"), &v1);
    alice.commit_all_and_push(&a, "v1");
    ok(alice.git_logged(&a, &["tag", "v1"]), "tag");
    ok(
        alice.git_logged(&a, &["push", "-q", "origin", "v1"]),
        "push tag",
    );
    // Bob clones with the store on, then pulls the next version.
    let b = bob.clone_ok(&remote, "b");
    let v2 = random_bytes(6 << 20, 22);
    write_file(&a.join("model.bin"), &v2);
    alice.commit_all_and_push(&a, "v2");
    ok(
        bob.git_logged(&b, &["pull", "-q", "origin", "main"]),
        "pull",
    );
    assert_eq!(
        lfs_objects(&b),
        1,
        "v1 lives in the store only (v2, checked out, stays whole)"
    );

    server.stop();
    let f = crate::mount::Fixture {
        server,
        env: bob,
        clone: b,
        v1: v1.clone(),
        v2: v2.clone(),
        small: Vec::new(),
    };
    let (guard, mut child) =
        mount_foreground(&f, "old", &["--rev", "v1", "--timeout", "5"], Stdio::null());
    let model = guard.0.join("model.bin");
    assert!(
        crate::mount::read_range(&model, 3_000_001, 70_000).unwrap() == v1[3_000_001..3_070_001]
    );
    assert!(
        std::fs::read(&model).unwrap() == v1,
        "the old revision, bit-exact, no server"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let (guard, mut child) = mount_foreground(&f, "head", &["--timeout", "5"], Stdio::null());
    assert!(std::fs::read(guard.0.join("model.bin")).unwrap() == v2);
    child.kill().unwrap();
    child.wait().unwrap();
}
