#!/usr/bin/env bash
# Installs the Restate server the loopward-restate tests start, from npm, pinned, into .restate/
# (gitignored). Idempotent: does nothing when that version is already there (about 30 s and
# 220 MB the first time).
set -euo pipefail
cd "$(dirname "$0")/.."
version=1.7.12
bin=.restate/node_modules/@restatedev/restate-server-linux-x64/bin/restate-server
if [ -x "$bin" ] && [ "$("$bin" --version 2>/dev/null | grep -o '[0-9][0-9.]*' | head -1)" = "$version" ]; then
    exit 0
fi
if ! command -v npm >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends npm
fi
mkdir -p .restate
npm install --prefix .restate --no-save --no-audit --no-fund --loglevel=error \
    "@restatedev/restate-server@$version"
"$bin" --version
