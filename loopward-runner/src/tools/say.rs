//! The `say` tool: an agent speaks to the people watching its run.
//!
//! The words go nowhere but the run's own records (the ledger's tool call and result), where
//! the run's page, `audit.md`, `report` and the console show them as `<agent> said: <text>`
//! ([`crate::audit::Sayings`]). The run neither stops nor waits, and nothing is decided by
//! what was said: it is not an approval. A person's words into a run take the other road
//! (`loopward say`, the inbox), and only they are recorded as a person's message.

use crate::context::TurnContext;
use crate::tool::{object_schema, parse_args, Access, Tool, ToolError, ToolInvocation, ToolOutput};
use futures::future::BoxFuture;
use futures::FutureExt;
use loopward_core::ToolSpec;
use serde::Deserialize;
use serde_json::json;

/// The tool's name, as agents list it and as its records carry it.
pub const SAY_TOOL: &str = "say";

/// The longest text one `say` carries, in characters: a message for a person, not a report.
pub const MAX_SAY_CHARS: usize = 2_000;

/// What the agent reads back: it was said, to whom, and that nothing waits on it.
pub const SAID: &str = "said to the people watching this run (its page and console show it); the run goes on: this asks nothing and approves nothing";

/// `say {text}`: tells the people watching the run something, and goes on.
///
/// ```
/// use loopward_runner::tools::Say;
/// use loopward_runner::tool::Tool;
/// assert_eq!(Say.spec().name, "say");
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Say;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    text: Option<String>,
}

/// The text of a `say` call, or why it cannot be said (with what to do instead).
fn text(arguments: &serde_json::Value) -> Result<String, ToolError> {
    let bad = |why: String| ToolError::BadArguments {
        tool: SAY_TOOL.into(),
        why,
    };
    let a: Args = parse_args(SAY_TOOL, arguments)?;
    let Some(text) = a.text else {
        return Err(bad(
            "`text` is missing: give the words for the people watching the run as {\"text\": \"…\"}".into(),
        ));
    };
    if text.trim().is_empty() {
        return Err(bad(
            "`text` is empty: write what the people watching the run should read".into(),
        ));
    }
    let n = text.chars().count();
    if n > MAX_SAY_CHARS {
        return Err(bad(format!(
            "`text` is {n} characters and the most is {MAX_SAY_CHARS}: say it in fewer words"
        )));
    }
    Ok(text)
}

impl Tool for Say {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: SAY_TOOL.into(),
            description: format!(
                "Tell the people watching this run something (at most {MAX_SAY_CHARS} characters). The run goes on: nobody answers, and it approves nothing."
            ),
            parameters: object_schema(
                json!({"text": {"type": "string", "maxLength": MAX_SAY_CHARS}}),
                &["text"],
            ),
        }
    }

    fn accesses(
        &self,
        arguments: &serde_json::Value,
        _turn: &TurnContext,
    ) -> Result<Vec<Access>, ToolError> {
        text(arguments)?;
        Ok(vec![])
    }

    fn call(&self, inv: ToolInvocation) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        // The words are in the call's own record; the result says they reached their readers.
        let said = text(&inv.call.arguments).map(|_| ToolOutput::text(SAID));
        async move { said }.boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn why(arguments: serde_json::Value) -> String {
        text(&arguments).unwrap_err().to_string()
    }

    #[test]
    fn missing_empty_and_oversized_text_are_refused_with_the_fix() {
        assert!(why(json!({})).contains("`text` is missing: give the words"));
        assert!(why(json!({"text": "  \n"})).contains("`text` is empty"));
        let long = "é".repeat(MAX_SAY_CHARS + 1);
        assert!(why(json!({ "text": long }))
            .contains("`text` is 2001 characters and the most is 2000: say it in fewer words"));
        assert!(why(json!({"text": "hi", "to": "ana"})).contains("unknown field `to`"));
        assert!(why(json!("hi")).contains("arguments must be a JSON object"));
    }

    #[test]
    fn text_at_the_bound_is_said_as_given() {
        let at = "é".repeat(MAX_SAY_CHARS);
        assert_eq!(text(&json!({ "text": at.clone() })).unwrap(), at);
    }
}
