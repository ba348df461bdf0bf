"""Drives the real `huggingface_hub` client against `git xet server` for tests/interop/hub.rs.

Usage: hub.py CHECK SPEC_JSON, the environment carrying HF_ENDPOINT, HF_TOKEN, HF_HOME.
The spec (written by the Rust test) names the repository, its commits and the expected
content of its files (local paths). Each check asserts and exits non-zero on a mismatch;
it prints a JSON summary for the test to read.

  download   model_info, list_repo_files/tree/refs, hf_hub_download by branch, tag and
             sha, snapshot_download, errors (missing repo, revision, file)
  isolation  what a token of another repository, and no token, get on every route
  upload     create_repo, upload_file/upload_folder (xet), deletes, parent_commit,
             list_repo_commits, delete_repo
  dataset    a dataset next to a model of the same name: create_repo, upload_folder,
             listings, snapshot_download, and each one's token kept out of the other
  refs       branches and tags (create, list, delete), upload_file onto a branch,
             get_paths_info and CommitOperationCopy
  locks      a file locked (git-lfs locks API) by one user cannot be changed by another's
             commits through the API; the owner's go through, and after the unlock all
  many       upload_folder of a folder of many small files (committed in the client's
             batches); uploaded again unchanged, no commit (preupload named every file's blob)
  figures    a 64 MiB file uploaded, downloaded, edited, uploaded and downloaded again:
             bytes the server received and served (its metrics) and seconds per step
  private    on a server with anonymous reads: private repositories (a model and a
             dataset) seen with a token only, a public one without
  settings   update_repo_settings (private, visibility; gated refused; admin only) on a
             server with anonymous reads, and an upload_file with HF_HUB_DISABLE_XET=1
             (LFS batch, basic PUT to the action's href without its headers, commit)
"""

import hashlib
import json
import os
import sys

import httpx2 as httpx
from huggingface_hub import HfApi, hf_hub_download, snapshot_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def same(path, expected_path, what):
    with open(path, "rb") as a, open(expected_path, "rb") as b:
        assert a.read() == b.read(), f"{what}: different bytes"


def raises(kind, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except kind as e:
        return e
    raise AssertionError(f"{fn.__name__}{args} did not raise {kind.__name__}")


def check_download(spec):
    repo, files, commits = spec["repo"], spec["files"], spec["commits"]
    api = HfApi()
    info = api.model_info(repo)
    assert info.sha == commits["main"], (info.sha, commits)
    assert sorted(s.rfilename for s in info.siblings) == sorted(files), info.siblings
    assert info.last_modified is not None
    assert sorted(api.list_repo_files(repo)) == sorted(files)
    tree = {e.path: e for e in api.list_repo_tree(repo, recursive=True)}
    big = spec["lfs_file"]
    assert tree[big].lfs is not None and tree[big].lfs.sha256 == sha256(files[big])
    assert tree[big].size == os.path.getsize(files[big])
    assert len(tree[big].xet_hash or "") == 64, tree[big]
    top = [e.path for e in api.list_repo_tree(repo)]
    assert "sub" in top and "sub/a.txt" not in top, top
    inside = [e.path for e in api.list_repo_tree(repo, path_in_repo="sub")]
    assert inside == ["sub/a.txt"], inside
    refs = api.list_repo_refs(repo)
    assert [(b.name, b.target_commit) for b in refs.branches] == sorted(
        [("main", commits["main"]), ("feat/x", commits["feat/x"])]
    ), refs
    assert [(t.name, t.target_commit) for t in refs.tags] == [("v1", commits["v1"])], refs

    # Downloads: the LFS file through hf_xet (or plain HTTP with HF_HUB_DISABLE_XET), the
    # others plain; by branch, tag, sha and a branch with a slash.
    for path, local in files.items():
        got = hf_hub_download(repo, path)
        assert f"snapshots/{commits['main']}/" in got, got
        same(got, local, path)
    # The blob is named by the sha256 (the ETag), as the tree listing's `lfs.oid`.
    blob = os.readlink(hf_hub_download(repo, big))
    assert os.path.basename(blob) == sha256(files[big]), blob
    old = hf_hub_download(repo, "sub/a.txt", revision="v1")
    assert open(old, "rb").read() == spec["v1_a"].encode(), old
    old = hf_hub_download(repo, "sub/a.txt", revision=commits["v1"])
    assert open(old, "rb").read() == spec["v1_a"].encode(), old
    feat = hf_hub_download(repo, "feat.txt", revision="feat/x")
    assert open(feat, "rb").read() == b"feature\n"
    snap = snapshot_download(repo)
    for path, local in files.items():
        same(os.path.join(snap, path), local, f"snapshot {path}")
    only = snapshot_download(repo, allow_patterns="*.json", local_dir=spec["local_dir"])
    assert sorted(os.listdir(only)) == [".cache", "config.json"], os.listdir(only)

    # Errors are the client's typed ones.
    raises(EntryNotFoundError, hf_hub_download, repo, "nope.txt")
    raises(RevisionNotFoundError, hf_hub_download, repo, "sub/a.txt", revision="nope")
    raises(RevisionNotFoundError, api.model_info, repo, revision="nope")
    raises(RepositoryNotFoundError, hf_hub_download, "org/nope", "sub/a.txt")
    assert api.file_exists(repo, "sub/a.txt") and not api.file_exists(repo, "nope.txt")
    assert api.repo_exists(repo) and not api.repo_exists("org/nope")
    assert api.revision_exists(repo, "feat/x") and not api.revision_exists(repo, "nope")

    # A plain range request, as a resumed download sends.
    url = f"{os.environ['HF_ENDPOINT']}/{repo}/resolve/main/{big}"
    auth = {"authorization": f"Bearer {os.environ['HF_TOKEN']}", "range": "bytes=5-"}
    r = httpx.get(url, headers=auth)
    assert r.status_code == 206, r.status_code
    assert r.content == open(files[big], "rb").read()[5:]
    print(json.dumps({"sha": info.sha}))


def check_isolation(spec):
    """Every route, with a token of another repository and with none: a missing repository
    (404, or 401 without a credential, X-Error-Code RepoNotFound), never data."""
    repo, endpoint = spec["repo"], os.environ["HF_ENDPOINT"]
    sha = spec["commits"]["main"]
    routes = [
        ("GET", f"/api/models/{repo}"),
        ("GET", f"/api/models/{repo}/revision/main"),
        ("GET", f"/api/models/{repo}/tree/main?recursive=true"),
        ("GET", f"/api/models/{repo}/refs"),
        ("GET", f"/api/models/{repo}/commits/main"),
        ("GET", f"/api/models/{repo}/xet-read-token/{sha}"),
        ("HEAD", f"/{repo}/resolve/main/sub/a.txt"),
        ("GET", f"/{repo}/resolve/main/sub/a.txt"),
        ("GET", f"/{repo}/resolve/main/{spec['lfs_file']}"),
    ] + [tuple(r) for r in spec.get("write_routes", [])]
    if "dataset" in spec:
        # A dataset too, created and filled with its own token: every dataset route.
        data, data_token = spec["dataset"]["repo"], spec["dataset"]["token"]
        own = HfApi(token=data_token)
        own.create_repo(data, repo_type="dataset")
        sha = own.upload_file(path_or_fileobj=b"hello\n", path_in_repo="sub/a.txt",
                              repo_id=data, repo_type="dataset").oid
        routes += [(m, p.replace("{sha}", sha)) for m, p in spec["dataset"]["routes"]]
    seen = []
    for token, status in [(spec["other_token"], 404), (None, 401)]:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        for method, path in routes:
            body = b"{}" if method not in ("GET", "HEAD") else None
            r = httpx.request(method, endpoint + path, headers=headers, content=body)
            code = r.headers.get("x-error-code")
            assert (r.status_code, code) == (status, "RepoNotFound"), (method, path, r.status_code, code)
            assert b"hello" not in r.content and b"accessToken" not in r.content, r.content
            seen.append(f"{method} {path} {r.status_code}")
        api = HfApi(token=token or False)
        assert not api.repo_exists(repo)
        assert not api.file_exists(repo, "sub/a.txt")
        raises(RepositoryNotFoundError, api.model_info, repo)
        raises(RepositoryNotFoundError, hf_hub_download, repo, "sub/a.txt", token=token or False)
    # A credential that does not verify is not mistaken for a missing repository.
    e = raises(HfHubHTTPError, HfApi(token="xet1.bad.bad").model_info, repo)
    assert e.response.status_code == 401 and not isinstance(e, RepositoryNotFoundError), e
    print(json.dumps(seen))


def check_upload(spec):
    """Uploads through the client (LFS files through hf_xet), checked by listing and
    download; prints the files the repository should now hold, for git to clone."""
    repo, scratch = spec["repo"], spec["scratch"]
    api = HfApi()
    url = api.create_repo(repo, private=True)
    assert url.repo_id == repo and url.repo_type == "model", url
    e = raises(HfHubHTTPError, api.create_repo, repo)
    assert e.response.status_code == 409, e
    api.create_repo(repo, exist_ok=True)
    first = api.model_info(repo)
    assert len(first.sha) == 40 and [s.rfilename for s in first.siblings] == [".gitattributes"]
    assert first.private is True

    def local(name, data):
        path = os.path.join(scratch, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        return path

    files = {}
    ci = api.upload_file(path_or_fileobj=b"hello\n", path_in_repo="a.txt", repo_id=repo)
    files["a.txt"] = local("a.txt", b"hello\n")
    assert len(ci.oid) == 40 and ci.repo_url.repo_id == repo, ci
    assert api.model_info(repo).sha == ci.oid
    # LFS by .gitattributes (safetensors), and by content (a binary .dat no rule covers).
    weights = local("model.safetensors", os.urandom(3_000_000))
    api.upload_file(path_or_fileobj=weights, path_in_repo="model.safetensors", repo_id=repo)
    files["model.safetensors"] = weights
    blob = local("data/blob.dat", b"\0" + os.urandom(400_000))
    api.upload_file(path_or_fileobj=blob, path_in_repo="data/blob.dat", repo_id=repo)
    files["data/blob.dat"] = blob
    api.upload_file(
        path_or_fileobj=b"---\nlicense: mit\n---\n# m\n", path_in_repo="README.md", repo_id=repo
    )
    files["README.md"] = local("README.md", b"---\nlicense: mit\n---\n# m\n")
    folder = os.path.join(scratch, "folder")
    for name, data in [("sub/x.txt", b"x\n"), ("sub/w.bin", os.urandom(200_000)), ("y.json", b"{}")]:
        local(os.path.join("folder", name), data)
    api.upload_folder(folder_path=folder, repo_id=repo, path_in_repo="f")
    for name in ["sub/x.txt", "sub/w.bin", "y.json"]:
        files[f"f/{name}"] = os.path.join(folder, name)
    tree = {e.path: e for e in api.list_repo_tree(repo, recursive=True)}
    for path in ["model.safetensors", "data/blob.dat", "f/sub/w.bin"]:
        assert tree[path].lfs is not None and tree[path].lfs.sha256 == sha256(files[path]), tree[path]
        assert len(tree[path].xet_hash or "") == 64, tree[path]
    for path in files:
        same(hf_hub_download(repo, path), files[path], path)

    # Deletes, and a commit on a head that moved.
    stale = api.model_info(repo).sha
    api.upload_file(path_or_fileobj=b"gone\n", path_in_repo="gone.txt", repo_id=repo)
    api.delete_file("gone.txt", repo)
    assert not api.file_exists(repo, "gone.txt")
    api.upload_file(path_or_fileobj=b"d\n", path_in_repo="tmp/d.txt", repo_id=repo)
    api.delete_folder("tmp", repo)
    assert not api.file_exists(repo, "tmp/d.txt")
    raises(EntryNotFoundError, api.delete_file, "nope.txt", repo)
    from huggingface_hub import CommitOperationAdd
    e = raises(
        HfHubHTTPError,
        api.create_commit,
        repo,
        operations=[CommitOperationAdd("late.txt", b"late\n")],
        commit_message="late",
        parent_commit=stale,
    )
    assert e.response.status_code == 409, e
    assert not api.file_exists(repo, "late.txt")

    # A read token cannot upload; another repository's token does not see the repository.
    e = raises(HfHubHTTPError, HfApi(token=spec["read_token"]).upload_file,
               path_or_fileobj=b"no\n", path_in_repo="no.txt", repo_id=repo)
    assert e.response.status_code == 403, e
    other = HfApi(token=spec["other_token"])
    raises(RepositoryNotFoundError, other.upload_file,
           path_or_fileobj=b"no\n", path_in_repo="no.txt", repo_id=repo)
    raises(HfHubHTTPError, other.create_repo, repo + "-2")
    assert sorted(api.list_repo_files(repo)) == sorted([".gitattributes"] + list(files))

    # History, newest first, and deleting repositories (admin only).
    head = api.model_info(repo).sha
    commits = api.list_repo_commits(repo)
    assert commits[0].commit_id == head and commits[-1].title == "initial commit", commits
    assert commits[0].created_at is not None and commits[0].authors, commits[0]
    e = raises(HfHubHTTPError, api.delete_repo, repo)
    assert e.response.status_code == 403, e
    raises(RepositoryNotFoundError, other.delete_repo, repo)
    admin = HfApi(token=spec["admin_token"])
    gone = spec["admin_repo"]
    admin.create_repo(gone)
    admin.delete_repo(gone)
    assert not admin.repo_exists(gone)
    admin.delete_repo(gone, missing_ok=True)
    raises(RepositoryNotFoundError, admin.delete_repo, gone)
    assert api.model_info(repo).sha == head
    print(json.dumps({"commit": api.model_info(repo).sha, "files": files}))


def check_dataset(spec):
    """A dataset is its own repository: the model of the same name is another one, each
    token sees only its own; prints the dataset's files for git to clone."""
    repo, scratch = spec["repo"], spec["scratch"]
    api, model = HfApi(), HfApi(token=spec["model_token"])
    url = api.create_repo(repo, repo_type="dataset", private=True)
    assert url.repo_id == repo and url.repo_type == "dataset", url
    assert url.endswith(f"/datasets/{repo}"), url
    e = raises(HfHubHTTPError, api.create_repo, repo, repo_type="dataset")
    assert e.response.status_code == 409, e
    api.create_repo(repo, repo_type="dataset", exist_ok=True)
    model.create_repo(repo)
    files = {}
    for name, data in [("train.csv", b"a,b\n1,2\n"), ("data/part-0.parquet", os.urandom(2_000_000)),
                       ("README.md", b"---\nlicense: mit\n---\n# d\n")]:
        path = os.path.join(scratch, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        files[name] = path
    ci = api.upload_folder(folder_path=scratch, repo_id=repo, repo_type="dataset")
    assert f"/datasets/{repo}/commit/" in ci.commit_url, ci.commit_url
    info = api.dataset_info(repo)
    assert info.id == repo and info.sha == ci.oid, info
    expected = sorted([".gitattributes"] + list(files))
    assert sorted(s.rfilename for s in info.siblings) == expected, info.siblings
    assert sorted(api.list_repo_files(repo, repo_type="dataset")) == expected
    assert model.list_repo_files(repo) == [".gitattributes"], "the model is another repository"
    tree = {e.path: e for e in api.list_repo_tree(repo, repo_type="dataset", recursive=True)}
    big = "data/part-0.parquet"
    assert tree[big].lfs is not None and tree[big].lfs.sha256 == sha256(files[big]), tree[big]
    assert len(tree[big].xet_hash or "") == 64, tree[big]
    snap = snapshot_download(repo, repo_type="dataset")
    assert "datasets--" in snap, snap
    for path, local in files.items():
        same(os.path.join(snap, path), local, f"snapshot {path}")
    same(hf_hub_download(repo, "train.csv", repo_type="dataset"), files["train.csv"], "train.csv")
    assert api.file_exists(repo, big, repo_type="dataset") and not model.file_exists(repo, big)
    assert api.repo_exists(repo, repo_type="dataset") and not api.repo_exists(repo)
    assert not model.repo_exists(repo, repo_type="dataset")
    raises(RepositoryNotFoundError, model.dataset_info, repo)
    raises(RepositoryNotFoundError, api.model_info, repo)
    raises(RepositoryNotFoundError, model.upload_file, path_or_fileobj=b"x", path_in_repo="x",
           repo_id=repo, repo_type="dataset")
    refs = api.list_repo_refs(repo, repo_type="dataset")
    assert [b.name for b in refs.branches] == ["main"], refs
    commits = api.list_repo_commits(repo, repo_type="dataset")
    assert commits[0].commit_id == ci.oid and commits[-1].title == "initial commit", commits
    print(json.dumps({"commit": ci.oid, "files": files}))


def check_refs(spec):
    repo = spec["repo"]
    api = HfApi()
    api.create_repo(repo)
    api.upload_file(path_or_fileobj=b"one\n", path_in_repo="a.txt", repo_id=repo)
    weights = os.urandom(300_000)
    api.upload_file(path_or_fileobj=b"\0" + weights, path_in_repo="w.bin", repo_id=repo)
    main1 = api.model_info(repo).sha

    # A branch, a commit onto it (main stays), branches from a start and tags.
    api.create_branch(repo, branch="dev")
    e = raises(HfHubHTTPError, api.create_branch, repo, branch="dev")
    assert e.response.status_code == 409, e
    api.create_branch(repo, branch="dev", exist_ok=True)
    dev = api.upload_file(path_or_fileobj=b"dev\n", path_in_repo="dev.txt", repo_id=repo,
                          revision="dev").oid
    assert api.model_info(repo).sha == main1 and not api.file_exists(repo, "dev.txt")
    assert api.file_exists(repo, "dev.txt", revision="dev")
    api.create_branch(repo, branch="feat/old", revision=main1)
    api.create_tag(repo, tag="v1", revision=main1)
    api.create_tag(repo, tag="v2", revision="dev", tag_message="second\n")
    e = raises(HfHubHTTPError, api.create_tag, repo, tag="v1")
    assert e.response.status_code == 409, e
    raises(RevisionNotFoundError, api.create_tag, repo, tag="v3", revision="nope")
    refs = api.list_repo_refs(repo)
    assert {b.name: b.target_commit for b in refs.branches} == {
        "main": main1, "dev": dev, "feat/old": main1}, refs
    assert {t.name: t.target_commit for t in refs.tags} == {"v1": main1, "v2": dev}, refs
    got = hf_hub_download(repo, "dev.txt", revision="v2")
    assert open(got, "rb").read() == b"dev\n"

    # paths-info: files (LFS with its sha256 and xet hash), a folder; missing ones left out.
    infos = {i.path: i for i in api.get_paths_info(repo, ["a.txt", "w.bin", "nope", "sub"],
                                                   revision="dev")}
    assert sorted(infos) == ["a.txt", "w.bin"], infos
    assert infos["w.bin"].lfs.sha256 == hashlib.sha256(b"\0" + weights).hexdigest(), infos
    assert len(infos["w.bin"].xet_hash or "") == 64 and infos["a.txt"].lfs is None, infos
    api.upload_file(path_or_fileobj=b"x\n", path_in_repo="sub/x.txt", repo_id=repo)
    folder = api.get_paths_info(repo, ["sub"])
    assert [(f.path, type(f).__name__) for f in folder] == [("sub", "RepoFolder")], folder

    # Copies: a regular file and an LFS one (committed from the object the repository holds).
    from huggingface_hub import CommitOperationCopy
    api.create_commit(repo, commit_message="copy", operations=[
        CommitOperationCopy("a.txt", "b.txt"), CommitOperationCopy("w.bin", "c/w.bin")])
    assert open(hf_hub_download(repo, "b.txt"), "rb").read() == b"one\n"
    assert open(hf_hub_download(repo, "c/w.bin"), "rb").read() == b"\0" + weights

    # Deletes; the default branch stays; a read token changes nothing.
    api.delete_branch(repo, branch="feat/old")
    api.delete_tag(repo, tag="v1")
    raises(RevisionNotFoundError, api.delete_branch, repo, branch="feat/old")
    raises(RevisionNotFoundError, api.delete_tag, repo, tag="v1")
    e = raises(HfHubHTTPError, api.delete_branch, repo, branch="main")
    assert e.response.status_code == 403, e
    reader = HfApi(token=spec["read_token"])
    for call, kwargs in [(reader.create_branch, {"branch": "r"}), (reader.create_tag, {"tag": "r"}),
                         (reader.delete_branch, {"branch": "dev"}), (reader.delete_tag, {"tag": "v2"})]:
        e = raises(HfHubHTTPError, call, repo, **kwargs)
        assert e.response.status_code == 403, (call, e)
    refs = api.list_repo_refs(repo)
    assert sorted(b.name for b in refs.branches) == ["dev", "main"], refs
    assert [t.name for t in refs.tags] == ["v2"], refs
    print(json.dumps({}))


def check_locks(spec):
    repo, endpoint = spec["repo"], os.environ["HF_ENDPOINT"]
    alice, bob = HfApi(token=spec["token"]), HfApi(token=spec["other_token"])
    alice.create_repo(repo)
    alice.upload_file(path_or_fileobj=b"v1\n", path_in_repo="notes.txt", repo_id=repo)
    lfs = {"accept": "application/vnd.git-lfs+json",
           "content-type": "application/vnd.git-lfs+json",
           "authorization": f"Bearer {spec['other_token']}"}
    r = httpx.post(f"{endpoint}/{repo}.git/info/lfs/locks", headers=lfs,
                   content=json.dumps({"path": "notes.txt"}))
    assert r.status_code == 201, (r.status_code, r.text)
    lock_id = r.json()["lock"]["id"]
    head = alice.model_info(repo).sha
    for change in [
        lambda: alice.upload_file(path_or_fileobj=b"v2\n", path_in_repo="notes.txt", repo_id=repo),
        lambda: alice.delete_file("notes.txt", repo),
    ]:
        e = raises(HfHubHTTPError, change)
        assert e.response.status_code == 403 and "locked" in str(e), e
    assert alice.model_info(repo).sha == head
    alice.upload_file(path_or_fileobj=b"free\n", path_in_repo="other.txt", repo_id=repo)
    bob.upload_file(path_or_fileobj=b"bob\n", path_in_repo="notes.txt", repo_id=repo)
    r = httpx.post(f"{endpoint}/{repo}.git/info/lfs/locks/{lock_id}/unlock", headers=lfs,
                   content=b"{}")
    assert r.status_code == 200, (r.status_code, r.text)
    alice.upload_file(path_or_fileobj=b"v3\n", path_in_repo="notes.txt", repo_id=repo)
    assert open(hf_hub_download(repo, "notes.txt"), "rb").read() == b"v3\n"
    print(json.dumps({}))


def check_many(spec):
    repo, folder, count = spec["repo"], spec["folder"], spec["count"]
    api = HfApi()
    api.create_repo(repo)
    ci = api.upload_folder(folder_path=folder, repo_id=repo, commit_message="many files")
    files = api.list_repo_files(repo)
    assert len(files) == count + 1 and ".gitattributes" in files, len(files)
    for name in spec["samples"]:
        same(hf_hub_download(repo, name), os.path.join(folder, name), name)
    again = api.upload_folder(folder_path=folder, repo_id=repo, commit_message="unchanged")
    assert again.oid == ci.oid, "an unchanged folder made a commit"
    print(json.dumps({"commit": ci.oid, "files": len(files)}))


def check_figures(spec):
    import time
    repo, endpoint = spec["repo"], os.environ["HF_ENDPOINT"]

    def metric(name):
        for line in httpx.get(endpoint + "/metrics").text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return 0.0

    api = HfApi()
    api.create_repo(repo)
    figures = {}
    for step, local in [("v1", spec["v1"]), ("v2", spec["v2"])]:
        received = metric("git_xet_xorb_bytes_received_total")
        started = time.monotonic()
        api.upload_file(path_or_fileobj=local, path_in_repo="model.safetensors", repo_id=repo)
        figures[f"upload_{step}_secs"] = time.monotonic() - started
        figures[f"upload_{step}_bytes"] = metric("git_xet_xorb_bytes_received_total") - received
        served = metric("git_xet_xorb_bytes_served_total")
        started = time.monotonic()
        snap = snapshot_download(repo)
        figures[f"download_{step}_secs"] = time.monotonic() - started
        figures[f"download_{step}_bytes"] = metric("git_xet_xorb_bytes_served_total") - served
        same(os.path.join(snap, "model.safetensors"), local, f"snapshot {step}")
    print(json.dumps(figures))


def check_private(spec):
    """Each repository of the spec: created with its token (private or not), a file
    uploaded; then what an anonymous caller sees."""
    anonymous = HfApi(token=False)
    for r in spec["repos"]:
        api, kind = HfApi(token=r["token"]), r.get("type")
        api.create_repo(r["repo"], repo_type=kind, private=r["private"])
        api.upload_file(path_or_fileobj=b"hello\n", path_in_repo="a.txt", repo_id=r["repo"],
                        repo_type=kind)
        assert api.repo_info(r["repo"], repo_type=kind).private is r["private"], r
        if r["private"]:
            assert not anonymous.repo_exists(r["repo"], repo_type=kind), r
            assert not anonymous.file_exists(r["repo"], "a.txt", repo_type=kind), r
            raises(RepositoryNotFoundError, anonymous.repo_info, r["repo"], repo_type=kind)
            raises(RepositoryNotFoundError, anonymous.list_repo_files, r["repo"], repo_type=kind)
            raises(RepositoryNotFoundError, hf_hub_download, r["repo"], "a.txt",
                   repo_type=kind, token=False)
        else:
            assert anonymous.repo_info(r["repo"], repo_type=kind).private is False, r
            got = hf_hub_download(r["repo"], "a.txt", repo_type=kind, token=False)
            assert open(got, "rb").read() == b"hello\n", got
    print(json.dumps({}))


def check_settings(spec):
    repo, big = spec["repo"], spec["big"]
    api, anonymous = HfApi(), HfApi(token=False)
    api.create_repo(repo)
    api.upload_file(path_or_fileobj=big, path_in_repo="big.bin", repo_id=repo)
    assert anonymous.repo_info(repo).private is False
    api.update_repo_settings(repo, private=True)
    assert api.repo_info(repo).private is True
    raises(RepositoryNotFoundError, anonymous.repo_info, repo)
    raises(RepositoryNotFoundError, hf_hub_download, repo, "big.bin", token=False)
    api.update_repo_settings(repo, visibility="public")
    assert anonymous.repo_info(repo).private is False
    e = raises(HfHubHTTPError, api.update_repo_settings, repo, gated="auto")
    assert e.response.status_code == 400 and "gated" in str(e), e
    writer = HfApi(token=spec["write_token"])
    e = raises(HfHubHTTPError, writer.update_repo_settings, repo, private=True)
    assert e.response.status_code == 403, e
    assert anonymous.repo_info(repo).private is False
    same(hf_hub_download(repo, "big.bin", token=False), big, "big.bin")
    print(json.dumps({"commit": api.model_info(repo).sha}))


def main(argv):
    check, spec_path = argv[1], argv[2]
    with open(spec_path) as f:
        spec = json.load(f)
    checks = {"download": check_download, "isolation": check_isolation, "upload": check_upload,
              "dataset": check_dataset, "private": check_private, "refs": check_refs, "locks": check_locks,
              "many": check_many, "figures": check_figures, "settings": check_settings}
    checks[check](spec)


if __name__ == "__main__":
    main(sys.argv)
