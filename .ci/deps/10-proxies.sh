#!/usr/bin/env bash
# nginx (TLS-terminating reverse proxy), tinyproxy (HTTP CONNECT proxy) and openssl (the
# test CA) for tests/git/compat_http.rs (Debian's packages). Skipped when present; the
# packages' own services are not started (the tests start their own on loopback).
set -euo pipefail
missing=()
command -v nginx >/dev/null 2>&1 || missing+=(nginx-light)
command -v tinyproxy >/dev/null 2>&1 || missing+=(tinyproxy)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
[ ${#missing[@]} -eq 0 ] && exit 0
command -v apt-get >/dev/null 2>&1 || { echo "missing ${missing[*]} and no apt-get" >&2; exit 1; }
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
