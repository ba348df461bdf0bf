"""A git-lfs custom transfer agent that behaves as Hugging Face's `git-xet` (xet-core's
git_xet) does, for tests/interop/hf_agent.rs: registered as `xet` without a direction,
it refuses downloads at init and uploads each object with the XET client (here hf-xet
from PyPI) using the action's X-Xet-* headers. Appends each init's operation to the file
named by HF_LIKE_AGENT_LOG.
"""

import json
import os
import sys

import hf_xet

REFUSAL = (
    "custom transfer for download is not implemented yet. Downloads should operate "
    "through standard git-lfs download protocol."
)


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def upload(req):
    header = req["action"]["header"]
    token = (header["X-Xet-Access-Token"], int(header["X-Xet-Token-Expiration"]))
    hf_xet.upload_files(
        [req["path"]], header["X-Xet-Cas-Url"], token, None, None, "model", sha256s=[req["oid"]]
    )
    send({"event": "progress", "oid": req["oid"], "bytesSoFar": req["size"], "bytesSinceLast": req["size"]})
    send({"event": "complete", "oid": req["oid"]})


def main():
    for line in sys.stdin:
        req = json.loads(line)
        event = req.get("event")
        if event == "init":
            with open(os.environ["HF_LIKE_AGENT_LOG"], "a") as log:
                log.write(req["operation"] + "\n")
            if req["operation"] == "download":
                send({"error": {"code": 32, "message": REFUSAL}})
            else:
                send({})
        elif event == "upload":
            try:
                upload(req)
            except Exception as e:  # reported to git-lfs like any failed transfer
                send({"event": "complete", "oid": req["oid"], "error": {"code": 2, "message": str(e)}})
        elif event == "terminate":
            return
        else:
            send({"event": "complete", "oid": req.get("oid"), "error": {"code": 32, "message": "unsupported"}})


if __name__ == "__main__":
    main()
