//! The traces' events for other tools: OpenTelemetry log records in the OTLP/JSON encoding
//! ([`otlp`]), and sending them to an OTLP/HTTP endpoint ([`push`]).

pub mod otlp;
pub mod push;
