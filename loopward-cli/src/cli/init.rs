//! `loopward init`: a commented starter config and the fake script that plays it.

use anyhow::{bail, Context, Result};
use loopward::config::{Config, CONFIG_FILE};
use loopward_term::render::{Printer, Tone};
use std::path::PathBuf;
use std::process::ExitCode;

/// The starter script's file name.
pub const SCRIPT_FILE: &str = "loopward.script.toml";

/// Write a starter loopward.toml and loopward.script.toml.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  mkdir team && cd team && loopward init && loopward run")]
pub struct Args {
    /// The folder to write into.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// Overwrite files that exist.
    #[arg(long)]
    pub force: bool,
}

/// The starter `loopward.toml`.
pub const STARTER_CONFIG: &str = r##"# loopward.toml — a team, its tools, and the rules enforced at the moment of action.
# Every key is listed here; unknown keys are refused at load with the file, key and fix.

[run]
first = "root"                      # the agent that takes the first turn
task = "Add a hello file, planned and reviewed."   # used when `loopward run` gets no --task
runs_dir = "runs"                   # ledgers: runs/<run-id>/events.jsonl
# workspace = "."                   # where agents act, relative to this file

[backend]
kind = "fake"                       # fake | llama | openai | anthropic
script = "loopward.script.toml"     # fake: the scripted replies, per agent
# model = "models/SmolLM2-135M-Instruct.Q4_1.gguf"   # llama: a GGUF file (`cargo xtask fetch-model`); http: a model name
# base_url = "http://127.0.0.1:8080/v1"              # openai/anthropic: the server
# api_key_env = "OPENAI_API_KEY"                     # the variable holding the key, or:
# api_key_file = "/home/me/.config/openai.key"       # a file holding only the key (not both)
# max_tokens = 512

# The team. Tools: read_file, write_file, edit_file, list_dir, shell, handoff, say, report_attempt.
[[agent]]
name = "root"
role = "You coordinate. You do not write plans or code yourself; hand work to the right agent."
tools = ["read_file", "list_dir", "handoff"]

[[agent]]
name = "planner"
role = "You write plan.md: a first line '# Plan', then numbered steps."
tools = ["read_file", "write_file", "handoff"]

[[agent]]
name = "builder"
role = "You implement the plan under src/."
tools = ["read_file", "write_file", "edit_file", "list_dir", "handoff"]
max_steps = 16                      # tool calls per turn

[[agent]]
name = "auditor"
role = "You review what the builder changed and say whether it is right."
tools = ["read_file", "list_dir"]

# Territories: deny by default. Only the owner writes here, unless a person grants a
# one-shot override (`loopward override grant`).
[[territory]]
paths = ["plan.md", "plans/**"]
owner = "planner"
# mode = "advisory"                 # warn and allow, to measure compliance (default: enforce)

[[territory]]
paths = ["src/**"]
owner = "builder"

# A third unit of work in one turn needs a plan on disk first.
[gates.sprawl]
threshold = 3
plan_path = "plan.md"
marker = "# Plan"

# After the builder touches src/**, its handoff must go to the auditor.
[[gates.review]]
from = "builder"
via = "auditor"
when = ["src/**"]

[limits]
turns_per_run = 12                  # no run takes more turns than this
# wall_time = "30m"                 # durations are strings with a unit: "500ms", "30s", "15m", "1h"

# [timeout]                         # per model call, tool call and turn (unset: no limit)
# model = "2m"
# tool = "30s"
# turn = "10m"

# [overrides]
# max_ttl = "15m"                   # the longest a one-shot override may live (at most "24h")

# Every key, its format and default: docs/config.md. Paths in territories and gates are globs
# relative to the workspace (`*` stays in one folder, `**` crosses folders).

# Ledgers are chained with HMAC-SHA256 under a key `loopward init` keeps in loopward's state
# directory ($XDG_STATE_HOME/loopward/<workspace>/, else ~/.local/state/…), outside the workspace.
# [ledger]
# chain = "sha256"                  # opt out: keyless ledgers (verify then needs --allow-keyless)
# witness = "/mnt/log/anchors.jsonl"  # also append every anchor here, out of the agents' reach
# [state]
# dir = "/var/lib/loopward/team"    # keep the state directory here instead

# Prices per model, in micro-dollars per million tokens (for cost figures and budgets). The fake
# model's are pretend ($3 / $15 per million tokens) so the report shows what costs look like.
[prices.fake]
input_per_mtok_micros = 3000000
output_per_mtok_micros = 15000000
"##;

/// The starter fake script: what each agent's "model" replies, in order.
pub const STARTER_SCRIPT: &str = r##"# loopward.script.toml — scripted model replies for the fake backend, per agent, in order.
# The n-th time an agent's model is called it gives its n-th reply.

[[agents.root]]
text = "The planner should plan this."
tool_calls = [{ name = "handoff", arguments = { to = "planner", message = "Plan a hello file under src/." } }]

[[agents.planner]]
tool_calls = [{ name = "write_file", arguments = { path = "plan.md", content = "# Plan\n1. write src/hello.txt\n2. auditor reviews it\n" } }]

[[agents.planner]]
tool_calls = [{ name = "handoff", arguments = { to = "builder", message = "plan.md has the steps." } }]

# The builder first tries to tick step 1 in the planner's plan.md: refused by the planner's
# territory, with what to do instead. It goes on with its own work and leaves the plan alone.
[[agents.builder]]
tool_calls = [{ name = "write_file", arguments = { path = "plan.md", content = "# Plan\n1. [x] write src/hello.txt\n2. auditor reviews it\n" } }]

[[agents.builder]]
tool_calls = [{ name = "write_file", arguments = { path = "src/hello.txt", content = "hello\n" } }]

[[agents.builder]]
tool_calls = [{ name = "handoff", arguments = { to = "auditor", message = "src/hello.txt is written; please review." } }]

[[agents.auditor]]
tool_calls = [{ name = "read_file", arguments = { path = "src/hello.txt" } }]

[[agents.auditor]]
text = "src/hello.txt says hello, as planned. Done."
"##;

pub(super) fn run(args: &Args) -> Result<ExitCode> {
    let cfg = args.dir.join(CONFIG_FILE);
    let script = args.dir.join(SCRIPT_FILE);
    for f in [&cfg, &script] {
        if f.exists() && !args.force {
            bail!(
                "{} exists; pass --force to overwrite it, or init another folder with --dir",
                f.display()
            );
        }
    }
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    // The starter must load: it is the file every new user reads first.
    Config::parse(&cfg, STARTER_CONFIG)?;
    std::fs::write(&cfg, STARTER_CONFIG)
        .with_context(|| format!("cannot write {}", cfg.display()))?;
    std::fs::write(&script, STARTER_SCRIPT)
        .with_context(|| format!("cannot write {}", script.display()))?;
    let mut out = Printer::stdout();
    out.line(Tone::Ok, format!("wrote {}", cfg.display()));
    out.line(Tone::Ok, format!("wrote {}", script.display()));
    // The ledger key: every run is chained under it; agents never see it.
    let loaded = Config::load(&cfg)?;
    let custody = super::state::open(&loaded, &cfg)?;
    if let Some(key) = custody.keys().current() {
        out.line(
            Tone::Ok,
            format!(
                "ledger key {} in {} (owner-only, outside the workspace)",
                key.id(),
                custody.state().root().join("keys").display()
            ),
        );
    }
    out.line(
        Tone::Dim,
        "next: `loopward run` runs the team on the fake backend; `loopward report` shows the figures",
    );
    Ok(ExitCode::SUCCESS)
}
