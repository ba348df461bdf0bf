//! `git xet mount` through real FUSE, read as a checkpoint loader reads it: the file
//! mapped, its header touched, then one tensor copied out of the map (its pages faulted in
//! order, as `safetensors` does). The server must send little more than the tensor: the
//! mount's read-ahead may not run far past what the map asked for.

use crate::env::{ok, remote_url, GitEnv};
use crate::mount::{have_fuse, mounted, Mounted, XORB_SERVED};
use crate::support::{lfs_objects, random_bytes, write_file, TestServer};

/// Maps the file, reads its first 8 bytes, then copies `len` bytes at `offset` out of the
/// map onto stdout.
const MAP_READER: &str = "import mmap, os, sys\n\
path, offset, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])\n\
m = mmap.mmap(os.open(path, os.O_RDONLY), 0, prot=mmap.PROT_READ)\n\
assert len(m[:8]) == 8\n\
sys.stdout.buffer.write(m[offset:offset + n])\n";

#[test]
fn one_tensor_read_through_a_map_costs_at_most_1_2x_its_size() {
    if !have_fuse() {
        return;
    }
    let server = TestServer::start();
    let remote = remote_url(&server, "org/checkpoint", "write");
    let env = GitEnv::with_agent(&[]);
    let a = env.lfs_repo("a", &remote);
    let model = random_bytes(48 << 20, 31);
    write_file(&a.join("model.bin"), &model);
    env.git(&a, &["add", "."]);
    env.git(&a, &["commit", "-qm", "checkpoint"]);
    // From elsewhere: the mount reads what its own chunk store holds without a request.
    let push = env
        .command("git", &a)
        .args(["push", "-q", "origin", "main"])
        .env("GIT_XET_STORE", env.dir("pusher-store"))
        .output()
        .unwrap();
    ok(push, "push");
    let clone = env.dir("clone");
    let out = env
        .command("git", &env.dir("."))
        .args(["clone", "-q", &remote, clone.to_str().unwrap()])
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    ok(out, "pointer-only clone");
    assert_eq!(lfs_objects(&clone), 0);

    // Tensors of 4 and 8 MiB, each read through a fresh mount, at offsets a safetensors
    // header leaves them (8 bytes and a JSON text: not page aligned).
    for (i, (offset, len)) in [(13_631_576usize, 4usize << 20), (30_409_000, 8 << 20)]
        .into_iter()
        .enumerate()
    {
        let view = env.dir(&format!("view{i}"));
        ok(
            env.xet_output(&clone, &["mount", view.to_str().unwrap()]),
            "git xet mount",
        );
        assert!(mounted(&view));
        let view = Mounted(view);
        let before = server.metric(XORB_SERVED);
        let out = std::process::Command::new("python3")
            .args(["-c", MAP_READER])
            .arg(view.0.join("model.bin"))
            .args([offset.to_string(), len.to_string()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.stdout == model[offset..offset + len],
            "the tensor differs"
        );
        let served = server.metric(XORB_SERVED) - before;
        let ratio = served / len as f64;
        eprintln!("{len} bytes through a map: {served} xorb bytes served ({ratio:.3}x)");
        assert!(
            ratio <= 1.2,
            "a {len} byte range read through a map made the server send {served} bytes \
             ({ratio:.3}x)"
        );
        ok(
            env.xet_output(&clone, &["unmount", view.0.to_str().unwrap()]),
            "git xet unmount",
        );
    }
}
