//! `export --otlp-endpoint`: the log records sent over OTLP/HTTP (crates/seedance-analyze/
//! src/export/push.rs) to a receiver this test starts on 127.0.0.1, which answers each request as
//! scripted and hands what it received back to the test. The receiver serves a fixed
//! number of connections (one request each, `Connection: close`); nothing waits on a clock.

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::mpsc;

/// One request as the receiver read it.
struct Received {
    request_line: String,
    /// Header names in lower case.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Starts the receiver; the i-th connection gets `answers[i]`: (status, extra header lines,
/// body). Returns the endpoint (`http://127.0.0.1:PORT`) and the requests, in order.
fn receiver(answers: Vec<(u16, &'static str, &'static str)>) -> (String, mpsc::Receiver<Received>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for (status, extra, body) in answers {
            let Ok((mut conn, _)) = listener.accept() else {
                return;
            };
            // Only against a client that stops sending; never reached when the test passes.
            conn.set_read_timeout(Some(std::time::Duration::from_secs(60)))
                .unwrap();
            let Some(req) = read_request(&mut conn) else {
                return;
            };
            // Handed over before answering: once the client has its answer, the test has
            // the request.
            tx.send(req).unwrap();
            let reply = format!(
                "HTTP/1.1 {status} Answer\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n{extra}\r\n{body}",
                body.len()
            );
            let _ = conn.write_all(reply.as_bytes());
        }
    });
    (endpoint, rx)
}

/// Reads one request with a `Content-Length` body; headers at most 64 KiB, the body at
/// most 64 MiB.
fn read_request(conn: &mut impl Read) -> Option<Received> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if buf.len() > 64 << 10 || conn.read(&mut byte).ok()? == 0 {
            return None;
        }
        buf.push(byte[0]);
    }
    let head = String::from_utf8(buf).ok()?;
    let mut lines = head.split("\r\n");
    let request_line = lines.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .map(|(_, v)| v.parse().unwrap())
        .expect("a Content-Length body");
    assert!(len <= 64 << 20);
    let mut body = vec![0; len];
    conn.read_exact(&mut body).ok()?;
    Some(Received {
        request_line,
        headers,
        body,
    })
}

/// `seedance-analyze export ARGS` with no proxy in the way; (exit code, stdout, stderr).
fn export(args: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_seedance-analyze"));
    cmd.arg("export").args(args).current_dir(super::crate_dir());
    for v in [
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
        "OTEL_RESOURCE_ATTRIBUTES",
    ] {
        cmd.env_remove(v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn decode(body: &[u8]) -> ExportLogsServiceRequest {
    serde_json::from_slice(body).unwrap()
}

fn records(req: &ExportLogsServiceRequest) -> usize {
    req.resource_logs
        .iter()
        .flat_map(|r| &r.scope_logs)
        .map(|s| s.log_records.len())
        .sum()
}

fn drain(rx: &mpsc::Receiver<Received>) -> Vec<Received> {
    rx.try_iter().collect()
}

#[test]
fn every_record_of_a_fleet_goes_to_the_endpoint_in_one_batch() {
    let (endpoint, rx) = receiver(vec![(200, "", "{}")]);
    let file = tempfile::NamedTempFile::new().unwrap();
    let out = file.path().to_str().unwrap();
    let (code, stdout, stderr) = export(&[
        "--otlp-endpoint",
        &endpoint,
        "-o",
        out,
        "tests/fixtures/fleet",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "");
    let got = drain(&rx);
    assert_eq!(got.len(), 1);
    let r = &got[0];
    assert_eq!(r.request_line, "POST /v1/logs HTTP/1.1");
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("content-encoding"), None);
    let req = decode(&r.body);
    let (_, summary, _) = super::run(&["summary", "--format", "json", "tests/fixtures/fleet"]);
    let summary: serde_json::Value = serde_json::from_str(&summary).unwrap();
    assert_eq!(
        Some(req.resource_logs.len() as u64),
        summary["input"]["files_read"].as_u64()
    );
    let n = records(&req);
    assert_eq!(Some(n as u64), summary["input"]["records"].as_u64());
    assert_eq!(
        stderr,
        format!("seedance-analyze: sent {n} log records in 1 request to {endpoint}/v1/logs\n")
    );
    // -o FILE still gets the file: one ExportLogsServiceRequest per line, the same records.
    let lines: Vec<ExportLogsServiceRequest> = std::fs::read_to_string(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.iter().map(records).sum::<usize>(), n);
}

#[test]
fn gzip_bodies_and_headers_are_sent() {
    let (endpoint, rx) = receiver(vec![(
        200,
        "",
        r#"{"partialSuccess":{"rejectedLogRecords":"2"}}"#,
    )]);
    let (code, _, stderr) = export(&[
        "--otlp-endpoint",
        &format!("{endpoint}/custom/path"),
        "--otlp-gzip",
        "--otlp-header",
        "Authorization=Bearer t0k3n",
        "tests/fixtures/v3/gpu-e/seedance-gpu-e-5001-1796100000000000000.jsonl",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let got = drain(&rx);
    assert_eq!(got.len(), 1);
    let r = &got[0];
    assert_eq!(r.request_line, "POST /custom/path HTTP/1.1");
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(r.header("authorization"), Some("Bearer t0k3n"));
    let mut body = Vec::new();
    flate2::read::GzDecoder::new(&r.body[..])
        .read_to_end(&mut body)
        .unwrap();
    let req = decode(&body);
    assert_eq!(req.resource_logs.len(), 1);
    let n = records(&req);
    assert!(n > 3, "{n}");
    assert!(
        stderr.ends_with(&format!(
            "sent {n} log records in 1 request to {endpoint}/custom/path, 2 rejected by the endpoint\n"
        )),
        "{stderr}"
    );
}

#[test]
fn retryable_answers_are_retried_with_the_same_body() {
    let (endpoint, rx) = receiver(vec![
        (503, "Retry-After: 0\r\n", ""),
        (429, "Retry-After: 0\r\n", ""),
        (200, "", "{}"),
    ]);
    let (code, _, stderr) = export(&["--otlp-endpoint", &endpoint, "tests/fixtures/fleet"]);
    assert_eq!(code, 0, "{stderr}");
    let got = drain(&rx);
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].body, got[1].body);
    assert_eq!(got[1].body, got[2].body);
}

#[test]
fn retries_are_bounded() {
    let (endpoint, rx) = receiver(vec![(503, "Retry-After: 0\r\n", "busy"); 6]);
    let (code, _, stderr) = export(&["--otlp-endpoint", &endpoint, "tests/fixtures/fleet"]);
    assert_eq!(code, 5, "{stderr}");
    // 5 attempts (PushOptions::new), not the sixth answer.
    assert_eq!(drain(&rx).len(), 5);
    assert_eq!(
        stderr,
        format!("seedance-analyze: OTLP export to {endpoint}/v1/logs failed: HTTP 503: busy, after 5 attempts; 0 of 1 request (0 log records) delivered\n")
    );
}

#[test]
fn a_permanent_error_is_not_retried() {
    let (endpoint, rx) = receiver(vec![(400, "", "bad body"), (200, "", "{}")]);
    let (code, _, stderr) = export(&["--otlp-endpoint", &endpoint, "tests/fixtures/fleet"]);
    assert_eq!(code, 5, "{stderr}");
    assert_eq!(drain(&rx).len(), 1);
    assert!(
        stderr.contains("failed: HTTP 400: bad body; 0 of 1 request"),
        "{stderr}"
    );
}

#[test]
fn a_bad_endpoint_is_a_usage_error() {
    let (code, _, stderr) = export(&["--otlp-endpoint", "https://c:4318", "tests/fixtures/fleet"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("https is not supported"), "{stderr}");
    let (code, _, stderr) = export(&[
        "--otlp-endpoint",
        "http://c:1",
        "--otlp-header",
        "nope",
        "tests/fixtures/fleet",
    ]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--otlp-header nope: not KEY=VALUE"),
        "{stderr}"
    );
}
