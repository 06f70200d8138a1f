//! The innermost tool service: runs the tool.

use super::{ToolError, ToolInvocation, ToolOutput};
use futures::future::BoxFuture;
use std::task::{Context, Poll};

/// Runs a [`ToolInvocation`]'s tool. Every tool stack ends here.
#[derive(Clone, Copy, Debug, Default)]
pub struct ToolExecutor;

impl tower::Service<ToolInvocation> for ToolExecutor {
    type Response = ToolOutput;
    type Error = ToolError;
    type Future = BoxFuture<'static, Result<ToolOutput, ToolError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), ToolError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, inv: ToolInvocation) -> Self::Future {
        let tool = inv.tool.clone();
        tool.call(inv)
    }
}
