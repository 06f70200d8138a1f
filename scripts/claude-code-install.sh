#!/usr/bin/env bash
# The Claude Code client the real-client tests drive (loopward-cli/tests/clients/), pinned, in
# .claude-code/ (about 10 s and 400 MB the first time: the package is a native binary). The
# client's updater stays off, also for the version check.
export DISABLE_AUTOUPDATER=1
exec bash "$(dirname "$0")/npm-client-install.sh" @anthropic-ai/claude-code 2.1.332 .claude-code claude
