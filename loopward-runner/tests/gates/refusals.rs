//! The refusal texts a model reads, one snapshot each: what was touched, the rule, the way out.

use super::support::*;
use loopward_runner::tool::{ToolError, ToolOutput};

fn text(r: Result<ToolOutput, ToolError>) -> String {
    match r {
        Err(e) => e.to_string(),
        Ok(o) => o.content,
    }
}

#[tokio::test]
async fn refusal_texts() {
    let room = Room::new(
        r#"
[[territory]]
paths = ["plans/**"]
owner = "planner"

[[gates.review]]
from = "builder"
via = "auditor"
when = ["src/**"]
"#,
    );
    room.write("plans/a.md", "keep");
    let b = room.turn("builder");
    let mut all = Vec::new();
    all.push((
        "territory",
        text(room.write_file(&b, "plans/a.md", "x").await),
    ));
    all.push((
        "control",
        text(room.write_file(&b, ".loopward/x.json", "{}").await),
    ));
    room.write_ok(&b, "src/a.rs", "a").await;
    room.write_ok(&b, "src/b.rs", "b").await;
    all.push(("sprawl", text(room.write_file(&b, "src/c.rs", "c").await)));
    all.push(("review", text(room.handoff(&b, "planner").await)));
    room.handoff(&b, "auditor").await.unwrap();
    all.push(("one_handoff", text(room.handoff(&b, "scribe").await)));
    let s = room.turn("scribe");
    let shell = text(room.shell(&s, "echo x > plans/a.md").await);
    all.push(("shell", shell));
    let rendered: String = all
        .iter()
        .map(|(k, v)| format!("## {k}\n{v}\n\n"))
        .collect();
    insta::assert_snapshot!(rendered);
}
