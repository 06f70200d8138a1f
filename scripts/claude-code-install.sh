#!/usr/bin/env bash
# Installs the Claude Code client the real-client test drives (loopward-cli/tests/clients/),
# from npm, pinned, into .claude-code/ (gitignored). Idempotent: does nothing when that version is
# already there (about 10 s and 400 MB the first time: the package is a native binary).
set -euo pipefail
cd "$(dirname "$0")/.."
version=2.1.332
bin=.claude-code/node_modules/.bin/claude
if [ -x "$bin" ] && [ "$(DISABLE_AUTOUPDATER=1 "$bin" --version 2>/dev/null | grep -o '^[0-9][0-9.]*' | head -1)" = "$version" ]; then
    exit 0
fi
if ! command -v npm >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends npm
fi
mkdir -p .claude-code
npm install --prefix .claude-code --no-save --no-audit --no-fund --loglevel=error \
    "@anthropic-ai/claude-code@$version"
DISABLE_AUTOUPDATER=1 "$bin" --version
