#!/usr/bin/env bash
# A walkthrough of `loopward hook claude-code`: a scratch project with a loopward.toml, and a
# realistic sequence of Claude Code hook events piped through the hook, one process per event,
# exactly as Claude Code runs it. Prints each event and the answer Claude Code would read.
#
#   scripts/claude-code-walkthrough.sh            # builds the binary with cargo first
#   LOOPWARD=/path/to/loopward scripts/claude-code-walkthrough.sh
#
# See docs/claude-code.md for what each answer means.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${LOOPWARD:-}" ]]; then
  cargo build -q -p loopward-demo --bin loopward
  LOOPWARD="$PWD/target/debug/loopward"
fi

PROJECT="$(mktemp -d)"
trap 'rm -rf "$PROJECT"' EXIT
cd "$PROJECT"
cat > loopward.toml <<'TOML'
# The Claude Code main agent (root) and the subagents territories name.
[run]
first = "root"

[[agent]]
name = "root"
tools = ["read_file", "write_file", "edit_file", "shell"]

[[agent]]
name = "planner"
tools = ["read_file", "write_file", "edit_file"]

[[agent]]
name = "builder"
tools = ["read_file", "write_file", "edit_file", "shell"]

# Only the planner subagent writes the roadmap; only the builder subagent writes src/.
[[territory]]
paths = ["plans/**"]
owner = "planner"

[[territory]]
paths = ["src/**"]
owner = "builder"

# A third unit of work in one turn needs a plan in plan.md first.
[gates.sprawl]
threshold = 3
plan_path = "plan.md"
marker = "# Plan"
TOML
mkdir -p plans src
printf '# Roadmap\n1. greeting\n' > plans/roadmap.md

SESSION="0f3c9a2e-walkthrough"
n=0
# event NAME AGENT JSON-FIELDS: sends one hook event and prints the answer.
event() {
  local name="$1" agent="$2" fields="$3" agent_field="" out err code
  [[ -n "$agent" ]] && agent_field="\"agent_id\": \"a-$agent\", \"agent_type\": \"$agent\","
  local json="{\"session_id\": \"$SESSION\", \"transcript_path\": \"$HOME/.claude/projects/demo/$SESSION.jsonl\", \"cwd\": \"$PROJECT\", \"permission_mode\": \"default\", $agent_field \"hook_event_name\": \"$name\", $fields}"
  n=$((n + 1))
  set +e
  out="$(printf '%s' "$json" | "$LOOPWARD" hook claude-code --config "$PROJECT/loopward.toml" 2>"$PROJECT/.stderr")"
  code=$?
  set -e
  err="$(cat "$PROJECT/.stderr")"
  printf '\n[%d] %s by %s: %s\n' "$n" "$name" "${agent:-root (main agent)}" "$(printf '%s' "$fields" | cut -c1-110)"
  printf '    exit %d %s\n' "$code" "${out:-(no output: Claude Code carries on)}"
  [[ -n "$err" ]] && printf '    stderr: %s\n' "$err"
  return 0
}
write_file() { mkdir -p "$(dirname "$1")"; printf '%s' "$2" > "$1"; }

echo "== A person asks for a feature: a new turn starts"
event UserPromptSubmit "" '"prompt": "Add a greeting feature, with tests and docs"'

echo; echo "== The main agent tries to edit the planner's roadmap: denied, with the way out"
event PreToolUse "" '"tool_name": "Edit", "tool_use_id": "toolu_01", "tool_input": {"file_path": "'"$PROJECT"'/plans/roadmap.md", "old_string": "1.", "new_string": "0."}'

echo; echo "== ... and the planner subagent may"
event PreToolUse planner '"tool_name": "Edit", "tool_use_id": "toolu_02", "tool_input": {"file_path": "'"$PROJECT"'/plans/roadmap.md", "old_string": "1.", "new_string": "0."}'
event PostToolUse planner '"tool_name": "Edit", "tool_use_id": "toolu_02", "tool_input": {"file_path": "'"$PROJECT"'/plans/roadmap.md", "old_string": "1.", "new_string": "0."}, "tool_response": {"filePath": "'"$PROJECT"'/plans/roadmap.md"}'

echo; echo "== A path that climbs out through .. is judged where it lands (src/ belongs to the builder)"
event PreToolUse "" '"tool_name": "Write", "tool_use_id": "toolu_03", "tool_input": {"file_path": "docs/../src/greeting.rs", "content": "pub fn hi() {}"}'

echo; echo "== The main agent uses Bash to write the roadmap anyway: put back, and told so"
event PreToolUse "" '"tool_name": "Bash", "tool_use_id": "toolu_04", "tool_input": {"command": "echo 3. world domination >> plans/roadmap.md; echo ok > notes.txt"}'
echo '3. world domination' >> plans/roadmap.md; echo ok > notes.txt   # what Claude Code runs
event PostToolUse "" '"tool_name": "Bash", "tool_use_id": "toolu_04", "tool_input": {"command": "echo 3. world domination >> plans/roadmap.md; echo ok > notes.txt"}, "tool_response": {"stdout": "", "stderr": "", "interrupted": false}'
echo "    plans/roadmap.md now: $(tr '\n' ' ' < plans/roadmap.md)| notes.txt stands: $(cat notes.txt)"

echo; echo "== A person grants a one-shot override: exactly one edit goes through, logged first"
"$LOOPWARD" override grant --config "$PROJECT/loopward.toml" --agent root --path plans/roadmap.md \
  --reason "fix the typo in step 1" --ttl 10m | sed 's/^/    /'
event PreToolUse "" '"tool_name": "Edit", "tool_use_id": "toolu_05", "tool_input": {"file_path": "'"$PROJECT"'/plans/roadmap.md", "old_string": "greeting", "new_string": "greetings"}'
event PreToolUse "" '"tool_name": "Edit", "tool_use_id": "toolu_06", "tool_input": {"file_path": "'"$PROJECT"'/plans/roadmap.md", "old_string": "greeting", "new_string": "greetings"}'

echo; echo "== The builder starts a third unit of work with no plan: refused once"
for f in greeting farewell parse; do
  id="toolu_1$f"
  event PreToolUse builder '"tool_name": "Write", "tool_use_id": "'$id'", "tool_input": {"file_path": "'"$PROJECT"'/src/'$f'.rs", "content": "// '$f'"}'
  if [[ $f != parse ]]; then
    write_file "src/$f.rs" "// $f"
    event PostToolUse builder '"tool_name": "Write", "tool_use_id": "'$id'", "tool_input": {"file_path": "'"$PROJECT"'/src/'$f'.rs", "content": "// '$f'"}, "tool_response": {"type": "create", "filePath": "'"$PROJECT"'/src/'$f'.rs"}'
  fi
done

echo; echo "== It writes the plan the refusal asked for, and goes on"
event PreToolUse builder '"tool_name": "Write", "tool_use_id": "toolu_20", "tool_input": {"file_path": "'"$PROJECT"'/plan.md", "content": "# Plan\n1. greeting\n2. farewell\n3. parse"}'
write_file plan.md $'# Plan\n1. greeting\n2. farewell\n3. parse\n'
event PostToolUse builder '"tool_name": "Write", "tool_use_id": "toolu_20", "tool_input": {"file_path": "'"$PROJECT"'/plan.md", "content": "# Plan"}, "tool_response": {"type": "create", "filePath": "'"$PROJECT"'/plan.md"}'
event PreToolUse builder '"tool_name": "Write", "tool_use_id": "toolu_21", "tool_input": {"file_path": "'"$PROJECT"'/src/parse.rs", "content": "// parse"}'

echo; echo "== Input that is not a hook event blocks (exit 2), never lets the tool run"
n=$((n + 1))
set +e
printf '{"session_id": "%s", "hook_event_name": "PreToolUse", "tool_name": "Wri' "$SESSION" \
  | "$LOOPWARD" hook claude-code --config "$PROJECT/loopward.toml"
printf '    exit %d\n' $?
set -e

echo; echo "== Every decision is in the session's ledger: runs/claude-code-$SESSION/events.jsonl"
wc -l < "runs/claude-code-$SESSION/events.jsonl" | sed 's/^/    records: /'
{ grep -o '"decision":{"decision":"[a-z]*"' "runs/claude-code-$SESSION/events.jsonl" || true; } \
  | sed -E 's/.*"decision":"([a-z]*)"/\1/' | sort | uniq -c | sed 's/^/    gate decisions: /'
if "$LOOPWARD" verify --help >/dev/null 2>&1; then
  echo; echo "== loopward verify and loopward report read it like any run"
  "$LOOPWARD" verify "runs/claude-code-$SESSION" || true
  "$LOOPWARD" report runs || true
fi
