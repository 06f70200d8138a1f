//! Exporting loopward's spans over OTLP/HTTP (feature `otel`).
//!
//! [`otlp_layer`] builds a `tracing-subscriber` layer that sends every span to an OpenTelemetry
//! collector; the application composes it into its subscriber and keeps the [`OtelGuard`] alive
//! (dropping it flushes the spans still queued). The library never installs a global subscriber
//! and never reads the environment: the endpoint is passed in.
//!
//! ```no_run
//! use tracing_subscriber::layer::SubscriberExt;
//! let (layer, _guard) = loopward_runner::telemetry::otel::otlp_layer(
//!     "loopward", "http://localhost:4318/v1/traces").unwrap();
//! let subscriber = tracing_subscriber::registry().with(layer);
//! tracing::subscriber::set_global_default(subscriber).unwrap();
//! // … run the team; spans go to the collector …
//! ```

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{SpanExporter, WithExportConfig};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tracing_opentelemetry::OpenTelemetryLayer;

/// The OTLP exporter could not be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the OTLP exporter for {endpoint}: {why}; check the collector URL (e.g. http://localhost:4318/v1/traces)")]
pub struct OtelError {
    /// The endpoint given.
    pub endpoint: String,
    /// Why.
    pub why: String,
}

/// Keeps the exporter running; dropping it flushes queued spans and shuts the exporter down.
#[derive(Debug)]
pub struct OtelGuard {
    provider: SdkTracerProvider,
}

impl Drop for OtelGuard {
    fn drop(&mut self) {
        // Nothing to report to: a library never prints, and the process is ending its tracing.
        let _ = self.provider.shutdown();
    }
}

/// A layer exporting spans to the OTLP/HTTP `endpoint` (the full traces URL) as service
/// `service_name`, batched on a background thread.
pub fn otlp_layer<S>(
    service_name: &str,
    endpoint: &str,
) -> Result<(OpenTelemetryLayer<S, SdkTracer>, OtelGuard), OtelError>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let exporter = SpanExporter::builder()
        .with_http()
        .with_endpoint(endpoint)
        .build()
        .map_err(|e| OtelError {
            endpoint: endpoint.into(),
            why: e.to_string(),
        })?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            Resource::builder()
                .with_service_name(service_name.to_string())
                .build(),
        )
        .build();
    let tracer = provider.tracer("loopward");
    Ok((
        tracing_opentelemetry::layer().with_tracer(tracer),
        OtelGuard { provider },
    ))
}
