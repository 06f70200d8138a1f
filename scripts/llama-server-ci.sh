#!/usr/bin/env bash
# The OpenAI-compatible backend against a real server: builds llama.cpp's `llama-server` (cached
# under target/llama-server/, see llama-server-build.sh), serves the CI model with it on
# 127.0.0.1 (PID recorded in target/llama-server/server.pid, stopped by that PID on exit), and
# runs loopward-cli/tests/llama_server/ against it (`loopward run --backend openai`: a governed
# team over streamed replies, a stop mid-stream, a run killed mid-stream, a server restarted
# mid-run, and real tool calls, gated). The restart and tool-call tests start servers of their
# own from the test (child processes they stop themselves; the tool-call one with
# --chat-template-file scripts/llama-server-tools.jinja); and loopward-cli/tests/loop_codex_llama.rs
# (`loopward loop --agent codex` whose sessions talk to this server's Responses API: Codex's
# first request is ~4,600 tokens, hence the 8,192-token context). Needs the model: `cargo xtask
# fetch-model`.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/llama-server-build.sh
BIN=target/llama-server/bin/llama-server
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$MODEL" ] || { echo "llama-server-ci: $MODEL is missing: run \`cargo xtask fetch-model\`" >&2; exit 1; }

PORT=${LOOPWARD_LLAMA_SERVER_PORT:-18431}
KEY="ci-$RANDOM$RANDOM"
PIDFILE=target/llama-server/server.pid
LOG=target/llama-server/server.log

# A server left by an earlier, interrupted run of this script: stop it by its recorded PID.
if [ -f "$PIDFILE" ]; then
    old=$(cat "$PIDFILE")
    if [ -n "$old" ] && [ "$(ps -o comm= -p "$old" 2>/dev/null)" = "llama-server" ]; then
        kill "$old" 2>/dev/null || true
        sleep 1
    fi
    rm -f "$PIDFILE"
fi

"$BIN" -m "$MODEL" --host 127.0.0.1 --port "$PORT" -c 8192 -np 1 --temp 0 --seed 1 -t 1 \
    --jinja --no-webui --api-key "$KEY" >"$LOG" 2>&1 &
echo $! >"$PIDFILE"
stop() {
    pid=$(cat "$PIDFILE" 2>/dev/null || true)
    if [ -n "$pid" ]; then
        # SIGTERM, then SIGKILL to the same PID if it is still up after 10 s (llama-server has
        # been seen to ignore a first SIGTERM; an unbounded wait would hang CI).
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -f "$PIDFILE"
}
trap stop EXIT

for _ in $(seq 1 600); do
    if curl -fsS "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then break; fi
    if ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
        echo "llama-server-ci: llama-server exited while starting; its log:" >&2
        cat "$LOG" >&2
        exit 1
    fi
    sleep 0.1
done
curl -fsS "http://127.0.0.1:$PORT/health" >/dev/null || { echo "llama-server-ci: llama-server is not healthy after 60 s; log: $LOG" >&2; exit 1; }

start=$(date +%s)
LOOPWARD_LLAMA_SERVER_URL="http://127.0.0.1:$PORT" \
LOOPWARD_LLAMA_SERVER_KEY="$KEY" \
LOOPWARD_LLAMA_SERVER_BIN="$PWD/$BIN" \
LOOPWARD_LLAMA_SERVER_MODEL="$PWD/$MODEL" \
    cargo test -p loopward-cli --features http --test llama_server --test loop_codex_llama -- --ignored --test-threads 1
echo "llama-server tests: $(( $(date +%s) - start )) s"
