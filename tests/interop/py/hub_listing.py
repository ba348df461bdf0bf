"""Drives the real `huggingface_hub` client's listings against `git xet server` for
tests/interop/hub_listing.rs: a repository of more files than one page holds.

Usage: hub_listing.py SPEC_JSON, the environment carrying HF_ENDPOINT, HF_TOKEN, HF_HOME.
The spec names the repository and what git lists in it: `files` (blobs) and `entries`
(blobs and directories, `ls-tree -r -t`), both in git's order. Asserts, then prints the
number of pages the tree listing took.
"""

import json
import os
import sys

import httpx2 as httpx
from huggingface_hub import HfApi, snapshot_download


def main(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    repo, files, entries = spec["repo"], spec["files"], spec["entries"]
    api = HfApi()
    # list_repo_files follows the pages; every file once, in the server's (git's) order.
    listed = api.list_repo_files(repo)
    assert listed == files, (len(listed), len(files), sorted(set(files) - set(listed))[:5])
    tree = [e.path for e in api.list_repo_tree(repo, recursive=True)]
    assert tree == entries, (len(tree), len(entries))
    # snapshot_download lists through the same pages.
    planned = snapshot_download(repo, dry_run=True)
    assert sorted(p.filename for p in planned) == sorted(files), len(planned)
    # The pages themselves: at most 1,000 entries each, a Link to the next.
    headers = {"authorization": f"Bearer {os.environ['HF_TOKEN']}"}
    url = f"{os.environ['HF_ENDPOINT']}/api/models/{repo}/tree/main?recursive=true"
    sizes = []
    while url:
        r = httpx.get(url, headers=headers)
        r.raise_for_status()
        sizes.append(len(r.json()))
        url = r.links.get("next", {}).get("url")
    assert all(n <= 1000 for n in sizes) and sum(sizes) == len(entries), sizes
    print(json.dumps({"pages": len(sizes), "files": len(listed)}))


if __name__ == "__main__":
    main(sys.argv[1])
