#!/usr/bin/env bash
# The Codex CLI the real-client test drives (loopward-cli/tests/clients/codex.rs), pinned, in
# .codex-cli/ (about 10 s and 420 MB the first time: the package is a native binary).
exec bash "$(dirname "$0")/npm-client-install.sh" @openai/codex 0.171.0 .codex-cli codex
