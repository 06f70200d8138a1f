//! Something moves while a model thinks: a spinner on stderr for the length of each model call,
//! with the agent, the seconds so far and — where the backend streams — about how many tokens
//! have arrived. Only on a terminal (a pipe or a log gets nothing), never under `--json` or
//! `--quiet`, and cleared before the timeline's next line.
//!
//! ```
//! use loopward_cli::heartbeat::message;
//! use std::time::Duration;
//! assert_eq!(message("planner", Duration::from_secs(3), None), "planner: waiting for the model · 3s");
//! assert_eq!(message("planner", Duration::from_secs(75), Some(42)), "planner: waiting for the model · 1m 15s · ~42 tokens");
//! ```

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use loopward_runner::model::{BoxModelService, ChatRequest};
use loopward_runner::telemetry::PROGRESS_TARGET;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tower::ServiceExt as _;

/// The call being shown, if any: its bar, agent, start and tokens so far.
struct Shown {
    bar: ProgressBar,
    agent: String,
    started: Instant,
    tokens: Option<u64>,
}

/// At most one model call runs at a time in a run; its spinner lives here so the progress
/// layer (fed by the backend's `tracing` events) can reach it.
static CURRENT: Mutex<Option<Shown>> = Mutex::new(None);

/// The spinner's text.
pub fn message(agent: &str, elapsed: Duration, tokens: Option<u64>) -> String {
    let secs = elapsed.as_secs();
    let time = if secs >= 60 {
        format!("{}m {}s", secs / 60, secs % 60)
    } else {
        format!("{secs}s")
    };
    match tokens {
        Some(n) => format!("{agent}: waiting for the model · {time} · ~{n} tokens"),
        None => format!("{agent}: waiting for the model · {time}"),
    }
}

/// Wraps `model` so each call shows a spinner while it runs (when `on`).
pub fn wrap(model: BoxModelService, on: bool) -> BoxModelService {
    if !on {
        return model;
    }
    BoxModelService::new(tower::service_fn(move |req: ChatRequest| {
        let model = model.clone();
        async move {
            let _shown = Guard::start(req.agent.as_str());
            model.oneshot(req).await
        }
    }))
}

/// Clears the spinner when the call ends, however it ends.
struct Guard;

impl Guard {
    fn start(agent: &str) -> Self {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_message(message(agent, Duration::ZERO, None));
        bar.enable_steady_tick(Duration::from_millis(120));
        let shown = Shown {
            bar,
            agent: agent.to_string(),
            started: Instant::now(),
            tokens: None,
        };
        *CURRENT.lock().unwrap_or_else(|p| p.into_inner()) = Some(shown);
        spawn_clock();
        Self
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(s) = CURRENT.lock().unwrap_or_else(|p| p.into_inner()).take() {
            s.bar.finish_and_clear();
        }
    }
}

/// Refreshes the seconds once a second while a call is shown.
fn spawn_clock() {
    std::thread::spawn(|| loop {
        std::thread::sleep(Duration::from_secs(1));
        let guard = CURRENT.lock().unwrap_or_else(|p| p.into_inner());
        let Some(s) = guard.as_ref() else { return };
        s.bar
            .set_message(message(&s.agent, s.started.elapsed(), s.tokens));
    });
}

/// A `tracing` layer that feeds streamed-token counts ([`PROGRESS_TARGET`]) to the spinner.
#[derive(Debug, Default)]
pub struct ProgressLayer;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for ProgressLayer {
    fn on_event(
        &self,
        event: &tracing::Event<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if event.metadata().target() != PROGRESS_TARGET {
            return;
        }
        let mut tokens = TokensField(None);
        event.record(&mut tokens);
        let mut guard = CURRENT.lock().unwrap_or_else(|p| p.into_inner());
        if let (Some(s), Some(n)) = (guard.as_mut(), tokens.0) {
            s.tokens = Some(n);
            s.bar
                .set_message(message(&s.agent, s.started.elapsed(), s.tokens));
        }
    }
}

struct TokensField(Option<u64>);

impl tracing::field::Visit for TokensField {
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        if field.name() == "tokens_so_far" {
            self.0 = Some(value);
        }
    }

    fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn streamed_tokens_reach_the_spinner_and_the_end_of_the_call_clears_it() {
        let subscriber = tracing_subscriber::registry().with(ProgressLayer);
        tracing::subscriber::with_default(subscriber, || {
            let guard = Guard::start("builder");
            loopward_runner::telemetry::record_progress(7);
            loopward_runner::telemetry::record_progress(12);
            {
                let shown = CURRENT.lock().unwrap();
                let s = shown.as_ref().expect("a call is shown");
                assert_eq!(s.tokens, Some(12));
                assert!(
                    s.bar.message().ends_with("· ~12 tokens"),
                    "{}",
                    s.bar.message()
                );
            }
            drop(guard);
            assert!(
                CURRENT.lock().unwrap().is_none(),
                "cleared when the call ends"
            );
        });
    }
}
