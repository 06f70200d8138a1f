#!/usr/bin/env bash
# The Gemini CLI whose hook protocol loopward-hooks/tests/hook_gemini.rs follows, pinned, in
# .gemini-cli/ (about 10 s and 100 MB the first time).
exec bash "$(dirname "$0")/npm-client-install.sh" @google/gemini-cli 0.61.0 .gemini-cli gemini
