//! A named set of tools.

use super::{Tool, ToolError};
use loopward_core::{ToolName, ToolSpec};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The tools one agent may call, by name.
#[derive(Clone, Default)]
pub struct ToolSet {
    tools: BTreeMap<ToolName, Arc<dyn Tool>>,
}

impl ToolSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool (replacing one of the same name).
    pub fn with(mut self, tool: impl Tool) -> Self {
        self.insert(Arc::new(tool));
        self
    }

    /// Adds a shared tool.
    pub fn insert(&mut self, tool: Arc<dyn Tool>) {
        self.tools.insert(tool.spec().name, tool);
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Result<Arc<dyn Tool>, ToolError> {
        self.tools
            .get(name)
            .cloned()
            .ok_or_else(|| ToolError::UnknownTool {
                name: name.chars().take(80).collect::<String>().into(),
                available: self.names().join(", "),
            })
    }

    /// Tool names, sorted (shared with the set, not copied).
    pub fn names(&self) -> Vec<ToolName> {
        self.tools.keys().cloned().collect()
    }

    /// Specs to show the model, sorted by name.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.values().map(|t| t.spec()).collect()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

impl std::fmt::Debug for ToolSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
    }
}
