#!/usr/bin/env bash
# Installs the Restate server the loopward-restate tests start, from npm, pinned, into .restate/
# (gitignored). Idempotent: does nothing when that version is already there (about 30 s and
# 220 MB the first time). The tests start the native binary the package brings,
# .restate/node_modules/@restatedev/restate-server-linux-x64/bin/restate-server.
set -euo pipefail
exec bash "$(dirname "$0")/npm-client-install.sh" @restatedev/restate-server 1.7.12 .restate restate-server
