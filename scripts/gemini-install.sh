#!/usr/bin/env bash
# The Gemini CLI the real-client test drives (loopward-cli/tests/clients/gemini.rs), pinned, in
# .gemini-cli/ (about 10 s and 100 MB the first time).
exec bash "$(dirname "$0")/npm-client-install.sh" @google/gemini-cli 0.61.0 .gemini-cli gemini
