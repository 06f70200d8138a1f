//! The readiness idiom of a leaf: a service that wraps no other (an agent, the tool executor, a
//! model backend) has no capacity of its own to wait for, so it is always ready and does all its
//! work in the future `call` returns. [`leaf_service!`](crate::leaf_service) writes that
//! `tower::Service` impl, so each leaf — loopward's own and a user's agent or model — says only
//! what its call does. A layer is exactly as ready as what it wraps (see
//! [`layers::from_fn`](crate::layers::from_fn)), so a stack of layers over leaves is ready at
//! once.

/// What [`leaf_service!`](crate::leaf_service) names, reached through this crate so that a
/// caller needs no `tower` or `futures` of its own.
#[doc(hidden)]
pub mod __private {
    pub use futures::future::BoxFuture;
    pub use tower::Service;
}

/// Implements `tower::Service<Req>` for a leaf: always ready, and `call` returns the boxed
/// future the closure-like body makes from `&mut self` and the request.
///
/// ```
/// use loopward_runner::leaf_service;
/// use loopward_core::AgentId;
/// use loopward_runner::model::{ChatRequest, ChatResponse, ModelError, TurnSlot};
/// use tower::ServiceExt;
///
/// /// A model that answers every request with the same text.
/// #[derive(Clone)]
/// struct Parrot(String);
///
/// leaf_service!(Parrot: ChatRequest => Result<ChatResponse, ModelError>, |parrot, _req| {
///     let content = parrot.0.clone();
///     Box::pin(async move { Ok(ChatResponse { content, ..ChatResponse::default() }) })
/// });
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let req = ChatRequest {
///     agent: AgentId::new("builder").unwrap(),
///     messages: vec![],
///     tools: vec![],
///     max_tokens: None,
///     turn: TurnSlot::empty(),
/// };
/// let reply = Parrot("hello".into()).oneshot(req).await.unwrap();
/// assert_eq!(reply.content, "hello");
/// # });
/// ```
#[macro_export]
macro_rules! leaf_service {
    ($ty:ty: $req:ty => Result<$resp:ty, $err:ty>, |$this:pat_param, $arg:pat_param| $call:expr) => {
        impl $crate::leaf::__private::Service<$req> for $ty {
            type Response = $resp;
            type Error = $err;
            type Future =
                $crate::leaf::__private::BoxFuture<'static, ::core::result::Result<$resp, $err>>;

            fn poll_ready(
                &mut self,
                _: &mut ::core::task::Context<'_>,
            ) -> ::core::task::Poll<::core::result::Result<(), $err>> {
                ::core::task::Poll::Ready(::core::result::Result::Ok(()))
            }

            fn call(&mut self, $arg: $req) -> Self::Future {
                let $this = self;
                $call
            }
        }
    };
}
