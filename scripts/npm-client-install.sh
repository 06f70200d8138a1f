#!/usr/bin/env bash
# Installs one agent host's CLI (or the Restate server) from npm, pinned, into a gitignored
# folder of the repository:
#   scripts/npm-client-install.sh <package> <version> <folder> <binary>
# Idempotent: does nothing when `<folder>/node_modules/.bin/<binary> --version` already says
# that version. The real-client tests drive what it installs (docs/hosts.md).
set -euo pipefail
cd "$(dirname "$0")/.."
package=$1 version=$2 folder=$3 binary=$4
bin=$folder/node_modules/.bin/$binary
if [ -x "$bin" ] && [ "$("$bin" --version 2>/dev/null | grep -o '[0-9][0-9.]*' | head -1)" = "$version" ]; then
    exit 0
fi
if ! command -v npm >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends npm
fi
mkdir -p "$folder"
npm install --prefix "$folder" --no-save --no-audit --no-fund --loglevel=error "$package@$version"
"$bin" --version
