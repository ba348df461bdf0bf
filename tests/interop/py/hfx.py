"""Drives the real reference client (PyPI hf-xet) for tests/interop.rs.

Usage (the CAS token comes from the environment, HFX_TOKEN, never from argv):
  hfx.py upload ENDPOINT FILE...            -> JSON [{"hash", "size"}] per file
  hfx.py download ENDPOINT HASH SIZE DEST   -> writes DEST
  hfx.py range ENDPOINT HASH SIZE START END DEST -> bytes START..END (end exclusive) to DEST
  hfx.py hash FILE...                       -> JSON [{"hash", "size"}] without uploading
"""

import json
import os
import sys
import time

import hf_xet


def token_info():
    return (os.environ["HFX_TOKEN"], int(time.time()) + 3600)


def infos(results):
    return [{"hash": r.hash, "size": r.file_size} for r in results]


def main(argv):
    cmd, args = argv[1], argv[2:]
    if cmd == "upload":
        endpoint, files = args[0], args[1:]
        out = hf_xet.upload_files(files, endpoint, token_info(), None, None, "model")
        print(json.dumps(infos(out)))
    elif cmd == "download":
        endpoint, file_hash, size, dest = args
        info = hf_xet.PyXetDownloadInfo(dest, file_hash, int(size))
        hf_xet.download_files([info], endpoint, token_info(), None, None)
    elif cmd == "range":
        endpoint, file_hash, size, start, end, dest = args
        token, expiry = token_info()
        session = hf_xet.XetSession()
        group = session.new_download_stream_group(
            endpoint=endpoint, token=token, token_expiry_unix_secs=expiry
        )
        info = hf_xet.XetFileInfo(file_hash, int(size))
        with open(dest, "wb") as f:
            for piece in group.download_stream(info, start=int(start), end=int(end)):
                f.write(piece)
        group.finish()
    elif cmd == "hash":
        print(json.dumps(infos(hf_xet.hash_files(args))))
    else:
        sys.exit(f"unknown command {cmd!r}")


if __name__ == "__main__":
    main(sys.argv)
