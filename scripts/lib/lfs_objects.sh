# Shared by the scripts/bench_*.sh that need many LFS objects without a client:
# lfs_objects N TOTAL_BYTES STORE SEED BARE_REPO writes N random objects of TOTAL_BYTES/N bytes
# each into STORE (a git-lfs-style store: one file per object, named by its sha256), and one
# commit on main of their pointers (data/NNN/NNNNN.bin, with .gitattributes) into BARE_REPO
# through git fast-import. SEED fixes the bytes, so a run is repeatable.
# shellcheck shell=bash
lfs_objects() {
  python3 - "$1" "$2" "$3" "$4" <<'PY' | git -C "$5" fast-import --quiet
import hashlib, os, random, sys
n, total, store, seed = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
os.makedirs(store, exist_ok=True)
size = total // n
rng = random.Random(seed)
out = sys.stdout.buffer
def blob(data):
    out.write(b"blob\nmark :%d\ndata %d\n" % (blob.mark, len(data)) + data + b"\n")
    blob.mark += 1
    return blob.mark - 1
blob.mark = 1
attrs = blob(b"*.bin filter=lfs diff=lfs merge=lfs -text\n")
files = []
for i in range(n):
    data = rng.randbytes(size)
    oid = hashlib.sha256(data).hexdigest()
    with open(os.path.join(store, oid), "wb") as f:
        f.write(data)
    pointer = b"version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n" % (oid.encode(), size)
    files.append((b"data/%03d/%05d.bin" % (i // 1000, i), blob(pointer)))
out.write(b"commit refs/heads/main\ncommitter bench <bench@example.com> 1700000000 +0000\ndata 6\nbench\n")
out.write(b"M 100644 :%d .gitattributes\n" % attrs)
for path, mark in files:
    out.write(b"M 100644 :%d %s\n" % (mark, path))
PY
}
