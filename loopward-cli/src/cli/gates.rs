//! `loopward gates list|add|rm`: the gates declared in loopward.toml.

use anyhow::{bail, Context, Result};
use loopward::config::{Config, CONFIG_FILE};
use loopward_core::{
    AuditEvent, AuditSink, GateChange, GateDefinition, GateKind, GateMode, RunId, Scope, ShownGate,
};
use loopward_runner::gates::{GateSpec, Policy};
use loopward_runner::{SystemClock, Workspace};
use loopward_term::render::{Printer, Tone};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// List, add or remove gates.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  loopward gates list
  loopward gates add territory --paths 'docs/**' --owner scribe
  loopward gates rm territory:scribe")]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
    /// The config file.
    #[arg(long, global = true, default_value = CONFIG_FILE)]
    pub config: PathBuf,
}

/// `gates` sub-commands.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// List every gate with its mode.
    #[command(after_help = "Example:\n  loopward gates list")]
    List,
    /// Add a territory or a review gate.
    #[command(
        after_help = "Examples:\n  loopward gates add territory --paths 'docs/**' --owner scribe\n  loopward gates add review --from builder --via auditor --when 'src/**'\n  loopward gates add review --from builder --via auditor --when 'docs/**' --name docs-review"
    )]
    Add {
        /// `territory` or `review`.
        #[arg(value_parser = ["territory", "review"])]
        kind: String,
        /// territory: globs.
        #[arg(long, num_args = 1..)]
        paths: Vec<String>,
        /// territory: the owner.
        #[arg(long)]
        owner: Option<String>,
        /// review: the gated agent.
        #[arg(long)]
        from: Option<String>,
        /// review: the reviewer.
        #[arg(long)]
        via: Option<String>,
        /// review: globs that arm it.
        #[arg(long, num_args = 1..)]
        when: Vec<String>,
        /// `enforce` (default) or `advisory`.
        #[arg(long, default_value = "enforce", value_parser = ["enforce", "advisory"])]
        mode: String,
        /// review: the gate's name (default `review:<from>-><via>`); needed for a second
        /// review gate between the same two agents.
        #[arg(long)]
        name: Option<String>,
    },
    /// Remove a gate by the name `gates list` shows.
    #[command(after_help = "Example:\n  loopward gates rm territory:planner")]
    Rm {
        /// The gate's name.
        name: String,
    },
}

pub(super) fn run(args: Args) -> Result<ExitCode> {
    let cfg = Config::load(&args.config)?;
    let dir = cfg.workspace_dir(&args.config);
    let ws = Workspace::new(&dir)
        .with_context(|| format!("cannot use {} as the workspace", dir.display()))?;
    let policy = Policy::from_config(&cfg.policy(), ws)?;
    let mut out = Printer::stdout();
    match args.action {
        Action::List => {
            for g in policy.list() {
                let what = g.spec.as_ref().map_or_else(
                    || "control files: .loopward/, the config, the runs folder (permanent)".into(),
                    describe,
                );
                out.line(
                    Tone::Plain,
                    format!("{:<28} {:<9} {what}", g.name, mode(g.mode)),
                );
            }
            for (i, g) in cfg.stopgates.iter().enumerate() {
                let name = g.name.clone().unwrap_or_else(|| format!("stopgate[{i}]"));
                out.line(
                    Tone::Plain,
                    format!(
                        "{name:<28} {:<9} stop-gate before {}",
                        g.mode.as_str(),
                        g.point
                    ),
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Action::Add {
            kind,
            paths,
            owner,
            from,
            via,
            when,
            mode,
            name,
        } => {
            let mut table = toml_edit::Table::new();
            let list = |v: &[String]| {
                toml_edit::value(toml_edit::Array::from_iter(v.iter().map(String::as_str)))
            };
            let (section, spec) = if kind == "territory" {
                let owner = owner.context("a territory needs --owner <agent>")?;
                if paths.is_empty() {
                    bail!("a territory needs --paths <glob>…");
                }
                table["paths"] = list(&paths);
                table["owner"] = toml_edit::value(owner.as_str());
                (
                    GateKind::Territory,
                    format!("territory of {owner}: {}", paths.join(", ")),
                )
            } else {
                let (from, via) = from
                    .zip(via)
                    .context("a review gate needs --from <agent> and --via <reviewer>")?;
                let gate = name
                    .clone()
                    .unwrap_or_else(|| format!("review:{from}->{via}"));
                if let Some(old) = cfg.gates.review.iter().find(|r| r.gate_name() == gate) {
                    let mut all = old.when.clone();
                    all.extend(when.iter().filter(|w| !old.when.contains(w)).cloned());
                    let quoted = |v: &[String]| {
                        v.iter()
                            .map(|w| format!("'{w}'"))
                            .collect::<Vec<_>>()
                            .join(" ")
                    };
                    bail!(
                        "{}: there is already a review gate named {gate} (when {}); nothing was written\nwhat to do: to arm it on more paths, replace it: `loopward gates rm {gate} && loopward gates add review --from {from} --via {via} --when {}`; for a second gate between them, give it its own name: --name <name>",
                        args.config.display(),
                        if old.when.is_empty() { "anything".to_string() } else { old.when.join(", ") },
                        quoted(&all),
                    );
                }
                if let Some(n) = &name {
                    table["name"] = toml_edit::value(n.as_str());
                }
                table["from"] = toml_edit::value(from.as_str());
                table["via"] = toml_edit::value(via.as_str());
                table["when"] = list(&when);
                (
                    GateKind::Review,
                    format!("review: {from} hands off via {via}"),
                )
            };
            table["mode"] = toml_edit::value(mode.as_str());
            edit(&args.config, |doc| {
                let aot = if section == GateKind::Territory {
                    doc.entry("territory")
                } else {
                    doc.entry("gates")
                        .or_insert(toml_edit::Item::Table(toml_edit::Table::new()))
                        .as_table_mut()
                        .context("`gates` is not a table")?
                        .set_implicit(true);
                    doc["gates"]
                        .as_table_mut()
                        .context("`gates` is not a table")?
                        .entry("review")
                };
                aot.or_insert(toml_edit::Item::ArrayOfTables(
                    toml_edit::ArrayOfTables::new(),
                ))
                .as_array_of_tables_mut()
                .context("the section is not an array of tables")?
                .push(table);
                Ok(())
            })?;
            record_change(
                &cfg,
                &args.config,
                GateChange::Add,
                GateDefinition::Shown(ShownGate {
                    gate: spec.clone(),
                    kind: section,
                }),
            )?;
            out.line(
                Tone::Ok,
                format!("added {spec} ({mode}) to {}", args.config.display()),
            );
            Ok(ExitCode::SUCCESS)
        }
        Action::Rm { name } => {
            let found = policy
                .list()
                .into_iter()
                .find(|g| g.name == name)
                .with_context(|| {
                    format!(
                        "there is no gate named {name:?}; `loopward gates list` shows: {}",
                        policy
                            .list()
                            .into_iter()
                            .map(|g| g.name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })?;
            let Some(spec) = found.spec else {
                bail!("{name} is permanent: control files are never writable by agents");
            };
            edit(&args.config, |doc| remove(doc, &cfg, &spec, &name))?;
            record_change(
                &cfg,
                &args.config,
                GateChange::Remove,
                GateDefinition::Rules(spec.rules()),
            )?;
            out.line(
                Tone::Ok,
                format!("removed {name} from {}", args.config.display()),
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn mode(m: GateMode) -> &'static str {
    match m {
        GateMode::Enforce => "enforce",
        GateMode::Advisory => "advisory",
    }
}

fn describe(spec: &GateSpec) -> String {
    match spec {
        GateSpec::Territory(t) => format!(
            "territory: {} — only {} may write",
            t.paths.join(", "),
            t.owner
                .iter()
                .chain(t.owners.iter())
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ),
        GateSpec::Sprawl(s) if !s.enabled => "sprawl gate: off".into(),
        GateSpec::Sprawl(s) => format!(
            "sprawl: unit of work #{} in a turn needs a plan in {} (first line {:?})",
            s.threshold, s.plan_path, s.marker
        ),
        GateSpec::Review(r) => format!(
            "review: after {} changes {}, its handoff goes to {}",
            r.from,
            if r.when.is_empty() {
                "anything".to_string()
            } else {
                r.when.join(", ")
            },
            r.via
        ),
    }
}

/// Applies `f` to the config file's document, checks the result loads, then writes it.
fn edit(path: &Path, f: impl FnOnce(&mut toml_edit::DocumentMut) -> Result<()>) -> Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .with_context(|| format!("{} is not valid TOML", path.display()))?;
    f(&mut doc)?;
    let new = doc.to_string();
    // Fail closed: a change that would not load, or whose gates would not build, is not written.
    let cfg = Config::parse(path, &new)
        .context("the changed config would not load; nothing was written")?;
    let dir = cfg.workspace_dir(path);
    let ws = Workspace::new(&dir)
        .with_context(|| format!("cannot use {} as the workspace", dir.display()))?;
    Policy::from_config(&cfg.policy(), ws).with_context(|| {
        format!(
            "{}: the changed config's gates would not build; nothing was written",
            path.display()
        )
    })?;
    std::fs::write(path, new).with_context(|| format!("cannot write {}", path.display()))
}

fn remove(
    doc: &mut toml_edit::DocumentMut,
    cfg: &Config,
    spec: &GateSpec,
    name: &str,
) -> Result<()> {
    match spec {
        GateSpec::Territory(_) => {
            let i = cfg
                .territories
                .iter()
                .position(|t| t.gate_name() == name)
                .context("territory not found in the file")?;
            doc["territory"]
                .as_array_of_tables_mut()
                .context("`territory` is not an array of tables")?
                .remove(i);
        }
        GateSpec::Review(_) => {
            let i = cfg
                .gates
                .review
                .iter()
                .position(|r| r.gate_name() == name)
                .context("review gate not found in the file")?;
            doc["gates"]["review"]
                .as_array_of_tables_mut()
                .context("`gates.review` is not an array of tables")?
                .remove(i);
        }
        GateSpec::Sprawl(_) => {
            doc["gates"]["sprawl"]["enabled"] = toml_edit::value(false);
        }
    }
    Ok(())
}

/// Records the change as a `gate_changed` event in its own hash-chained ledger under
/// `.loopward/changes/` (a control folder agents cannot write), so who changed which gate and
/// when is evidence, not memory.
fn record_change(
    cfg: &Config,
    config: &Path,
    change: GateChange,
    gate: GateDefinition,
) -> Result<()> {
    let changes = cfg.workspace_dir(config).join(".loopward").join("changes");
    let clock = Arc::new(SystemClock);
    let id = super::run::new_run_id(&*clock);
    let id = RunId::new(format!("gates-{}", id.as_str().trim_start_matches("run-")))
        .context("change id")?;
    let custody = super::state::open(cfg, config)?;
    let ledger = loopward::ledger::create(&changes, &id, custody.ledger_options(&changes, clock)?)?;
    let by = std::env::var("USER").unwrap_or_else(|_| "cli".into());
    ledger.record(
        &Scope {
            run: id,
            turn: None,
            agent: None,
        },
        &AuditEvent::GateChanged {
            by: format!("{by} (loopward gates)"),
            change,
            gate,
        },
    )?;
    ledger.finish()?;
    Ok(())
}
