//! `export --otlp-endpoint URL`: sends the log records of an [`Export`] to an OTLP/HTTP
//! endpoint (an OpenTelemetry Collector's `otlp` receiver, port 4318), as the OTLP
//! specification's "OTLP/HTTP" section describes: `POST` to `/v1/logs`, the body an
//! `ExportLogsServiceRequest` in the JSON encoding (`Content-Type: application/json`),
//! optionally gzip-compressed (`Content-Encoding: gzip`).
//!
//! - Batches: the resources of several trace files go in one request, up to
//!   [`PushOptions::max_batch_records`] log records and [`PushOptions::max_batch_bytes`]
//!   bytes of JSON (one resource larger than that goes alone).
//! - Retries: a connection error, or the statuses the specification calls retryable (429,
//!   502, 503, 504), are retried, at most [`PushOptions::max_attempts`] attempts in all; the
//!   wait before each retry is the response's `Retry-After` (seconds) when it has one, else
//!   [`PushOptions::backoff`] doubled at each retry, never more than
//!   [`PushOptions::max_backoff`]. Any other status is a permanent failure: nothing more is
//!   sent, since the next requests would meet the same answer.
//! - Partial success: a 2xx answer's `partialSuccess.rejectedLogRecords` are counted.
//!
//! The HTTP client is `ureq`, which takes proxies from the usual `http_proxy`/`ALL_PROXY`
//! variables. Only `http://` endpoints: this build has no TLS.

use crate::export::otlp::Export;
use flate2::write::GzEncoder;
use std::io::Write;
use std::time::Duration;

/// Statuses worth retrying (OTLP specification, "Retryable Response Codes").
pub const RETRYABLE_STATUSES: [u16; 4] = [429, 502, 503, 504];

/// How to send.
#[derive(Debug, Clone)]
pub struct PushOptions {
    /// The URL to `POST` to, `/v1/logs` included ([`logs_url`] makes it from what the user
    /// gives).
    pub url: String,
    /// Compress every body with gzip.
    pub gzip: bool,
    /// Extra headers (authentication), sent with every request.
    pub headers: Vec<(String, String)>,
    /// Most attempts for one request, the first included (at least 1).
    pub max_attempts: u32,
    /// The wait before the first retry; doubled at each next one.
    pub backoff: Duration,
    /// The longest wait before a retry, `Retry-After` included.
    pub max_backoff: Duration,
    /// The longest one attempt may take, connecting, sending and reading the answer.
    pub timeout: Duration,
    /// Most log records in one request.
    pub max_batch_records: u64,
    /// Most bytes of JSON in one request (before compression).
    pub max_batch_bytes: usize,
}

impl PushOptions {
    /// The defaults for `url`: 5 attempts, 1 s first wait, 30 s longest, 30 s per attempt,
    /// batches of at most 1000 records and 4 MiB (the Collector takes 20 MiB by default).
    pub fn new(url: String) -> PushOptions {
        PushOptions {
            url,
            gzip: false,
            headers: Vec::new(),
            max_attempts: 5,
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            timeout: Duration::from_secs(30),
            max_batch_records: 1000,
            max_batch_bytes: 4 << 20,
        }
    }
}

/// What was sent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PushReport {
    /// Requests the endpoint accepted (2xx).
    pub requests: u64,
    /// Log records in those requests.
    pub log_records: u64,
    /// Log records the endpoint said it rejected (`partialSuccess`).
    pub rejected_log_records: u64,
    /// Attempts that were retried.
    pub retries: u64,
    /// Requests not sent or not accepted (the failed one included), when one failed.
    pub requests_left: u64,
    /// Why sending stopped, when it did before the end.
    pub failure: Option<String>,
}

/// The URL to `POST` log records to, from the endpoint a user gives: as the OTLP exporter
/// specification says of `OTEL_EXPORTER_OTLP_ENDPOINT`, an endpoint without a path
/// (`http://collector:4318`, or with `/`) gets `/v1/logs`; one with a path is used as it
/// is. `Err` for anything but an `http://` URL with a host.
pub fn logs_url(endpoint: &str) -> Result<String, String> {
    let rest = endpoint.strip_prefix("http://").ok_or_else(|| {
        if endpoint.starts_with("https://") {
            format!("{endpoint}: https is not supported by this build (no TLS); use http://")
        } else {
            format!("{endpoint}: not an http:// URL")
        }
    })?;
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if host.is_empty() {
        return Err(format!("{endpoint}: no host"));
    }
    Ok(if path.is_empty() || path == "/" {
        format!("http://{host}/v1/logs")
    } else {
        endpoint.to_string()
    })
}

/// The requests' bodies: the resources of `export` grouped as the batch limits allow, each
/// with its number of log records.
pub fn batches(export: &Export, opts: &PushOptions) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = Vec::new();
    let mut items: Vec<&str> = Vec::new();
    let (mut records, mut bytes) = (0u64, 0usize);
    let mut flush = |items: &mut Vec<&str>, records: &mut u64, bytes: &mut usize| {
        if !items.is_empty() {
            out.push((
                format!("{{\"resourceLogs\":[{}]}}", items.join(",")),
                *records,
            ));
        }
        items.clear();
        (*records, *bytes) = (0, 0);
    };
    for (item, n) in &export.resource_logs {
        // Each resource takes its length and a comma.
        let fits =
            records + n <= opts.max_batch_records && bytes + item.len() < opts.max_batch_bytes;
        if !fits {
            flush(&mut items, &mut records, &mut bytes);
        }
        items.push(item);
        records += n;
        bytes += item.len() + 1;
    }
    flush(&mut items, &mut records, &mut bytes);
    out
}

enum Attempt {
    Accepted {
        rejected: u64,
    },
    Retry {
        after: Option<Duration>,
        why: String,
    },
    Failed(String),
}

/// Sends every log record of `export` to `opts.url` (see the module documentation).
pub fn push(export: &Export, opts: &PushOptions) -> PushReport {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(opts.timeout))
        .user_agent(format!("seedance-analyze/{}", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    let mut report = PushReport::default();
    let all = batches(export, opts);
    let total = all.len() as u64;
    for (body, records) in all {
        let body = if opts.gzip {
            match gzip(body.as_bytes()) {
                Ok(b) => b,
                Err(e) => {
                    report.failure = Some(format!("gzip: {e}"));
                    report.requests_left = total - report.requests;
                    return report;
                }
            }
        } else {
            body.into_bytes()
        };
        let mut wait = opts.backoff;
        let mut attempt = 1;
        loop {
            match send(&agent, opts, &body) {
                Attempt::Accepted { rejected } => {
                    report.requests += 1;
                    report.log_records += records;
                    report.rejected_log_records += rejected;
                    break;
                }
                Attempt::Retry { after, .. } if attempt < opts.max_attempts => {
                    std::thread::sleep(after.unwrap_or(wait).min(opts.max_backoff));
                    wait = wait.saturating_mul(2);
                    attempt += 1;
                    report.retries += 1;
                }
                Attempt::Retry { why, .. } => {
                    report.failure = Some(format!("{why}, after {attempt} attempts"));
                    report.requests_left = total - report.requests;
                    return report;
                }
                Attempt::Failed(why) => {
                    report.failure = Some(why);
                    report.requests_left = total - report.requests;
                    return report;
                }
            }
        }
    }
    report
}

fn gzip(data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut e = GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data)?;
    e.finish()
}

fn send(agent: &ureq::Agent, opts: &PushOptions, body: &[u8]) -> Attempt {
    let mut req = agent
        .post(&opts.url)
        .header("Content-Type", "application/json");
    if opts.gzip {
        req = req.header("Content-Encoding", "gzip");
    }
    for (k, v) in &opts.headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let mut resp = match req.send(body) {
        Ok(r) => r,
        // Connection refused, reset, timed out: the endpoint may be back in a moment.
        Err(e) => {
            return Attempt::Retry {
                after: None,
                why: e.to_string(),
            }
        }
    };
    let status = resp.status().as_u16();
    let after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let text = resp
        .body_mut()
        .with_config()
        .limit(1 << 20)
        .read_to_string()
        .unwrap_or_default();
    if (200..300).contains(&status) {
        let rejected = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| {
                let r = &v["partialSuccess"]["rejectedLogRecords"];
                // A 64-bit integer is a decimal string in OTLP/JSON; accept a number too.
                r.as_u64()
                    .or_else(|| r.as_str().and_then(|s| s.parse().ok()))
            })
            .unwrap_or(0);
        return Attempt::Accepted { rejected };
    }
    let mut why = format!("HTTP {status}");
    let text = text.trim();
    if !text.is_empty() {
        let cut: String = text.chars().take(200).collect();
        why.push_str(&format!(": {cut}"));
    }
    if RETRYABLE_STATUSES.contains(&status) {
        Attempt::Retry { after, why }
    } else {
        Attempt::Failed(why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_url_adds_the_signal_path_to_a_bare_endpoint() {
        assert_eq!(
            logs_url("http://collector:4318").unwrap(),
            "http://collector:4318/v1/logs"
        );
        assert_eq!(
            logs_url("http://collector:4318/").unwrap(),
            "http://collector:4318/v1/logs"
        );
        assert_eq!(
            logs_url("http://gw/otlp/v1/logs").unwrap(),
            "http://gw/otlp/v1/logs"
        );
        assert!(logs_url("https://c:4318").unwrap_err().contains("no TLS"));
        assert!(logs_url("collector:4318")
            .unwrap_err()
            .contains("not an http"));
        assert!(logs_url("http:///v1/logs").unwrap_err().contains("no host"));
    }

    #[test]
    fn batches_group_resources_within_the_limits() {
        let export = Export {
            resource_logs: vec![
                ("{\"a\":1}".into(), 600),
                ("{\"b\":2}".into(), 300),
                ("{\"c\":3}".into(), 200),
                ("{\"d\":4}".into(), 5000),
            ],
            ..Export::default()
        };
        let opts = PushOptions::new("http://x/v1/logs".into());
        let b = batches(&export, &opts);
        assert_eq!(
            b,
            [
                ("{\"resourceLogs\":[{\"a\":1},{\"b\":2}]}".to_string(), 900),
                ("{\"resourceLogs\":[{\"c\":3}]}".to_string(), 200),
                ("{\"resourceLogs\":[{\"d\":4}]}".to_string(), 5000),
            ]
        );
        let small = PushOptions {
            max_batch_bytes: 10,
            ..opts
        };
        assert_eq!(batches(&export, &small).len(), 4);
    }
}
