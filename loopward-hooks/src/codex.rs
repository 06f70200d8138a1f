//! OpenAI Codex CLI's hook protocol, where it differs from Claude Code's.
//!
//! Codex's hooks use Claude Code's wire format (checked against the JSON schemas shipped in the
//! Codex 0.171.0 binary: `pre-tool-use.command.input`/`.output`, `post-tool-use.…`,
//! `user-prompt-submit.…`): the same `session_id`, `cwd`, `hook_event_name`, `tool_name`,
//! `tool_input`, `tool_use_id` and `agent_type`, the same `hookSpecificOutput.permissionDecision`
//! answers and exit status 2 for a blocking error. What differs:
//!
//! - Tools: every shell surface (`shell`, `exec_command`, `local_shell`, …) reaches the hook as
//!   `Bash` with `tool_input.command`; file edits are `apply_patch`, its patch body in
//!   `tool_input.command` ([`patch_paths`] reads which files it touches). Any other tool name is
//!   one the installed matcher does not send, so the hook denies it rather than guess.
//! - Answers: `permissionDecision: "allow"` alone is refused by Codex ("unsupported"), so an
//!   allowed call gets no answer; `updatedInput` is taken only with `"allow"`, so a wrapped
//!   command is answered `allow` + `updatedInput`; `ask` is unsupported.
//! - There is no `PostToolUseFailure`: a failed command comes back as `PostToolUse`.
//!
//! ```
//! use loopward_hooks::codex::{patch_paths, PatchOp};
//! let patch = "*** Begin Patch\n*** Add File: src/new.rs\n+fn x() {}\n*** Update File: plan.md\n*** Move to: old/plan.md\n@@\n-a\n+b\n*** Delete File: gone.txt\n*** End Patch\n";
//! assert_eq!(patch_paths(patch).unwrap(), vec![
//!     PatchOp::Add("src/new.rs".into()),
//!     PatchOp::Update { path: "plan.md".into(), to: Some("old/plan.md".into()),
//!         replaced: vec![("a".into(), "b".into())] },
//!     PatchOp::Delete("gone.txt".into()),
//! ]);
//! assert!(patch_paths("rm -rf /").is_err());
//! ```

use super::claude_code::Reply;
use serde_json::{json, Value};

/// One file operation of an `apply_patch` body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PatchOp {
    /// `*** Add File: <path>`.
    Add(String),
    /// `*** Update File: <path>`, with `*** Move to: <to>` when it is also moved.
    Update {
        /// The file changed.
        path: String,
        /// Where it moves, if it does.
        to: Option<String>,
        /// What each changed line replaced, its common start and end trimmed (`fn lex()` →
        /// `fn tokens()` is `lex` → `tokens`): the same replacement in many files is one unit
        /// of work for the sprawl gate, as the runner's `edit_file` counts it.
        replaced: Vec<(String, String)>,
    },
    /// `*** Delete File: <path>`.
    Delete(String),
}

/// The file operations of an `apply_patch` body, in order; a body that is not a patch (no
/// `*** Begin Patch` first, an empty path, no operation at all) is refused with why, so nothing
/// unjudged is let through.
pub fn patch_paths(patch: &str) -> Result<Vec<PatchOp>, String> {
    let mut lines = patch.lines().map(str::trim_end);
    if lines.next().map(str::trim) != Some("*** Begin Patch") {
        return Err("the apply_patch input does not start with `*** Begin Patch`".into());
    }
    let mut ops: Vec<PatchOp> = Vec::new();
    let path = |rest: &str| {
        let p = rest.trim();
        if p.is_empty() {
            Err("an apply_patch file header names no path".to_string())
        } else {
            Ok(p.to_string())
        }
    };
    // The `-` and `+` lines of the current run of changes in an update.
    let (mut minus, mut plus): (Vec<&str>, Vec<&str>) = (vec![], vec![]);
    for line in lines {
        let header = line.starts_with("*** ");
        let changed = !header && (line.starts_with('-') || line.starts_with('+'));
        if !changed || (line.starts_with('-') && !plus.is_empty()) {
            pair_into(&mut ops, &mut minus, &mut plus);
        }
        if let Some(rest) = line.strip_prefix("*** Add File:") {
            ops.push(PatchOp::Add(path(rest)?));
        } else if let Some(rest) = line.strip_prefix("*** Update File:") {
            ops.push(PatchOp::Update {
                path: path(rest)?,
                to: None,
                replaced: vec![],
            });
        } else if let Some(rest) = line.strip_prefix("*** Delete File:") {
            ops.push(PatchOp::Delete(path(rest)?));
        } else if let Some(rest) = line.strip_prefix("*** Move to:") {
            match ops.last_mut() {
                Some(PatchOp::Update { to, .. }) if to.is_none() => *to = Some(path(rest)?),
                _ => return Err("`*** Move to:` does not follow an `*** Update File:`".into()),
            }
        } else if let Some(old) = line.strip_prefix('-').filter(|_| changed) {
            minus.push(old);
        } else if let Some(new) = line.strip_prefix('+').filter(|_| changed) {
            plus.push(new);
        }
    }
    pair_into(&mut ops, &mut minus, &mut plus);
    if ops.is_empty() {
        return Err("the apply_patch input changes no file".into());
    }
    Ok(ops)
}

/// Pairs a run of removed and added lines of an update, line by line when they are as many,
/// into the replacements of the update they belong to.
fn pair_into(ops: &mut [PatchOp], minus: &mut Vec<&str>, plus: &mut Vec<&str>) {
    if let Some(PatchOp::Update { replaced, .. }) = ops.last_mut() {
        if minus.len() == plus.len() {
            for (old, new) in minus.iter().zip(plus.iter()) {
                if let Some(pair) = trimmed(old, new) {
                    replaced.push(pair);
                }
            }
        }
    }
    minus.clear();
    plus.clear();
}

/// `old` → `new` with their common start and end removed (`None` when they are equal).
fn trimmed(old: &str, new: &str) -> Option<(String, String)> {
    if old == new {
        return None;
    }
    let start = old
        .char_indices()
        .zip(new.chars())
        .find(|((_, a), b)| a != b)
        .map_or(old.len().min(new.len()), |((i, _), _)| i);
    let (o, n) = (&old[start..], &new[start.min(new.len())..]);
    let end = o
        .chars()
        .rev()
        .zip(n.chars().rev())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a.len_utf8())
        .sum::<usize>();
    Some((
        o[..o.len() - end].to_string(),
        n[..n.len() - end].to_string(),
    ))
}

/// `reply` as Codex reads it on stdout (see the [module docs](self)).
pub(crate) fn render(reply: &Reply) -> String {
    let value = match reply {
        Reply::Silent | Reply::Allow { .. } => return String::new(),
        Reply::Deny { .. } | Reply::Block { .. } => return reply.render(),
        Reply::Rewrite { reason, input } => json!({ "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "permissionDecisionReason": reason,
            "updatedInput": input,
        } }),
        Reply::FailureContext { context } => json!({ "hookSpecificOutput": {
            "hookEventName": "PostToolUse", "additionalContext": context } }),
    };
    let mut out = Value::to_string(&value);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_renamed_word_is_the_same_replacement_whatever_line_it_is_on() {
        let one = "*** Begin Patch\n*** Update File: a.rs\n@@\n-fn lex() {}\n+fn tokens() {}\n*** End Patch\n";
        let two = "*** Begin Patch\n*** Update File: b.rs\n@@ x\n use y;\n-use crate::lex;\n+use crate::tokens;\n*** End Patch\n";
        for p in [one, two] {
            let ops = patch_paths(p).unwrap();
            let PatchOp::Update { replaced, .. } = &ops[0] else {
                panic!("{ops:?}")
            };
            assert_eq!(replaced, &[("lex".to_string(), "tokens".to_string())]);
        }
        assert_eq!(trimmed("aé", "aè"), Some(("é".into(), "è".into())));
    }

    #[test]
    fn a_patch_without_its_header_or_any_file_is_refused() {
        assert!(patch_paths("").is_err());
        assert!(patch_paths("*** Begin Patch\n*** End Patch\n").is_err());
        assert!(patch_paths("*** Begin Patch\n*** Add File:   \n").is_err());
        assert!(patch_paths("*** Begin Patch\n*** Move to: x\n").is_err());
    }

    #[test]
    fn an_allow_is_silent_and_a_rewrite_carries_allow_as_codex_requires() {
        assert_eq!(
            render(&Reply::Allow {
                reason: "ok".into()
            }),
            ""
        );
        let out = render(&Reply::Rewrite {
            reason: "wrapped".into(),
            input: json!({"command": "w"}),
        });
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "allow");
        assert_eq!(v["hookSpecificOutput"]["updatedInput"]["command"], "w");
        let deny = render(&Reply::Deny {
            reason: "no".into(),
        });
        assert!(deny.contains(r#""permissionDecision":"deny""#), "{deny}");
    }
}
