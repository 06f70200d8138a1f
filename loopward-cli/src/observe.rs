//! What the binary shows of its own workings: `tracing` spans and events on stderr, filtered
//! by `RUST_LOG` (nothing when it is unset), and — with the `otel` feature — every span exported
//! over OTLP/HTTP when the standard `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_ENDPOINT` variable is set (`OTEL_SERVICE_NAME` names the service).
//!
//! ```
//! // The OTLP endpoint per the OpenTelemetry spec: the traces variable as given, the general one
//! // with the signal's path appended.
//! let env = |k: &str| (k == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| "http://127.0.0.1:4318/".to_string());
//! assert_eq!(
//!     loopward_cli::observe::traces_endpoint(env).as_deref(),
//!     Some("http://127.0.0.1:4318/v1/traces")
//! );
//! ```

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Keeps the exporter alive; dropping it flushes the spans still queued.
#[derive(Debug, Default)]
pub struct Guard {
    #[cfg(feature = "otel")]
    _otel: Option<loopward_runner::telemetry::otel::OtelGuard>,
}

/// The OTLP traces endpoint the environment names, if any.
pub fn traces_endpoint(env: impl Fn(&str) -> Option<String>) -> Option<String> {
    let set = |k: &str| env(k).filter(|v| !v.trim().is_empty());
    set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| {
        set("OTEL_EXPORTER_OTLP_ENDPOINT")
            .map(|base| format!("{}/v1/traces", base.trim_end_matches('/')))
    })
}

/// Installs the process's subscriber: stderr under `RUST_LOG`, OTLP where configured. Returns a
/// note for the person when the environment asks for something this build cannot do.
pub fn init(env: impl Fn(&str) -> Option<String>) -> (Guard, Option<String>) {
    let filter = env("RUST_LOG").filter(|v| !v.trim().is_empty());
    let mut note = None;
    let stderr = filter.as_ref().map(|f| {
        let filter = EnvFilter::try_new(f).unwrap_or_else(|e| {
            note = Some(format!(
                "RUST_LOG={f:?} is not a valid filter ({e}); showing warnings only"
            ));
            EnvFilter::new("warn")
        });
        // Colour only on a terminal, and never under NO_COLOR.
        let ansi =
            std::io::IsTerminal::is_terminal(&std::io::stderr()) && env("NO_COLOR").is_none();
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(ansi)
            .with_target(false)
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
            .with_filter(filter)
    });
    let endpoint = traces_endpoint(&env);
    #[cfg(feature = "otel")]
    {
        let service = env("OTEL_SERVICE_NAME").unwrap_or_else(|| "loopward".into());
        let otel = match endpoint {
            Some(url) => match loopward_runner::telemetry::otel::otlp_layer(&service, &url) {
                Ok((layer, guard)) => Some((layer, guard)),
                Err(e) => {
                    note = Some(format!("cannot export spans to {url}: {e}"));
                    None
                }
            },
            None => None,
        };
        let (layer, guard) = match otel {
            Some((l, g)) => (Some(l), Some(g)),
            None => (None, None),
        };
        // Failing to install means a subscriber is already set (tests): keep that one.
        let _ = tracing_subscriber::registry()
            .with(stderr)
            .with(layer)
            .with(progress())
            .try_init();
        (Guard { _otel: guard }, note)
    }
    #[cfg(not(feature = "otel"))]
    {
        if let Some(url) = endpoint {
            note = Some(format!(
                "OTEL_EXPORTER_OTLP_* names {url}, but this build has no OpenTelemetry export: \
                 install with `cargo install --path loopward-cli --features otel`"
            ));
        }
        let _ = tracing_subscriber::registry()
            .with(stderr)
            .with(progress())
            .try_init();
        (Guard::default(), note)
    }
}

/// The spinner's feed: streamed-token events only, whatever `RUST_LOG` says.
fn progress<S>() -> impl Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    crate::heartbeat::ProgressLayer.with_filter(tracing_subscriber::filter::filter_fn(|m| {
        m.target() == loopward_runner::telemetry::PROGRESS_TARGET
    }))
}
