//! Traces in object storage (crates/seedance-analyze/src/read/remote.rs), end to end against a
//! real S3-compatible server: moto's server mode (`moto_server`, PyPI `moto[server]`),
//! started by the test on 127.0.0.1. The same few thousand small traces (and a gzip one,
//! and a file that is not a trace) go to a bucket and to a local directory; `summary`,
//! `export` and `diff` of `s3://bucket/prefix/` must say what they say of the directory.
//!
//! Without `moto_server` on `PATH` the test says `skipped: moto not found` on stderr and
//! passes, unless `SEEDANCE_REQUIRE_MOTO=1`, when it fails (`.ci/run` installs moto and sets
//! the variable).

use futures::StreamExt;
use object_store::{ObjectStoreExt, PutPayload};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const OBJECTS: usize = 2000;
const BUCKET: &str = "fleet-traces";

/// `name` on `PATH`; else `None` after one `skipped` line on stderr, or a failure when
/// `require` (a `SEEDANCE_REQUIRE_*` variable) is `1`.
pub(crate) fn find_on_path(name: &str, require: &str, test: &str, hint: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if let Some(p) = std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
    {
        return Some(p);
    }
    let required = std::env::var(require).is_ok_and(|v| v == "1");
    assert!(
        !required,
        "{name} ({hint}) is needed for {test} and was not found on PATH, and {require}=1 says \
         this test must run; CI installs it in .ci/run"
    );
    let _ = writeln!(
        std::io::stderr(),
        "{test}: skipped: {name} not found ({name} on PATH; set {require}=1 to make that a \
         failure)"
    );
    None
}

fn moto_server() -> Option<PathBuf> {
    find_on_path(
        "moto_server",
        "SEEDANCE_REQUIRE_MOTO",
        "s3::summary_export_and_diff_read_a_bucket_as_a_directory",
        "PyPI moto[server]: pip install 'moto[server]'",
    )
}

/// The server, killed when dropped.
struct Moto {
    child: Child,
    endpoint: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(exe: &Path) -> Moto {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(exe)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Werkzeug says "Running on http://127.0.0.1:PORT" once it listens.
    let ready = wait_for_line(child.stderr.take().unwrap(), |line| {
        line.contains("Running on").then_some(())
    });
    let moto = Moto {
        child,
        endpoint: format!("http://127.0.0.1:{port}"),
    };
    if let Err(seen) = ready {
        panic!("moto_server did not start:\n{seen}");
    }
    moto
}

/// Reads a server's log until a line `ready` accepts (at most 200 lines), then drains the
/// rest on a thread so that the pipe never fills. `Err` holds what was read when no line
/// was accepted; the caller owns the child first, so that it is stopped when it panics.
pub(crate) fn wait_for_line<T>(
    log: impl std::io::Read + Send + 'static,
    ready: impl Fn(&str) -> Option<T>,
) -> Result<T, String> {
    let mut log = BufReader::new(log);
    let mut seen = String::new();
    let mut found = None;
    for _ in 0..200 {
        let mut line = String::new();
        if log.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        seen.push_str(&line);
        found = ready(&line);
        if found.is_some() {
            break;
        }
    }
    std::thread::spawn(move || std::io::copy(&mut log, &mut std::io::sink()));
    found.ok_or(seen)
}

/// Trace `i`: a session start, a failing call and an exit summary of pid 10000 + i.
pub(crate) fn trace(i: usize) -> String {
    let pid = 10_000 + i;
    let host = format!("gpu-{}", i % 50);
    format!(
        concat!(
            r#"{{"v":1,"seq":0,"ts_ns":{t0},"pid":{pid},"tid":{pid},"event":"session_start","hostname":"{host}","executable":"/usr/bin/python3","argv":["python3"],"mode":"observe","driver_version":13000,"devices":[]}}"#,
            "\n",
            r#"{{"v":1,"seq":1,"ts_ns":{t1},"pid":{pid},"tid":{pid},"event":"call_failed","function":"cuMemAlloc_v2","result":2,"result_name":"CUDA_ERROR_OUT_OF_MEMORY","args":{{"bytesize":{i}}}}}"#,
            "\n",
            r#"{{"v":1,"seq":2,"ts_ns":{t2},"pid":{pid},"tid":{pid},"event":"exit_summary","duration_ns":1000,"functions":{{"cuMemAlloc_v2":{{"calls":{calls},"errors":1,"errors_by_result":{{"CUDA_ERROR_OUT_OF_MEMORY":1}}}}}},"dropped_records":0}}"#,
            "\n"
        ),
        t0 = 1_796_000_000_000_000_000u64 + i as u64 * 1_000_000,
        t1 = 1_796_000_000_000_000_500u64 + i as u64 * 1_000_000,
        t2 = 1_796_000_000_000_001_000u64 + i as u64 * 1_000_000,
        pid = pid,
        host = host,
        i = i,
        calls = 10 + i % 7,
    )
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// `n` traces, a gzip one and a file that is not a trace: (key under the prefix, bytes).
pub(crate) fn objects(n: usize) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = (0..n)
        .map(|i| {
            (
                format!("node-{:02}/seedance-{i:05}.jsonl", i % 20),
                trace(i).into_bytes(),
            )
        })
        .collect();
    v.push((
        "rotated/seedance-big.jsonl.gz".into(),
        gzip(trace(n).as_bytes()),
    ));
    v.push(("README.md".into(), b"# traces of the fleet\n".to_vec()));
    v
}

/// Runs the analyzer with `vars` and none of the proxy, profile and certificate variables
/// of the test's own environment; returns (exit code, stdout, stderr).
pub(crate) fn analyze_env(args: &[&str], vars: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_seedance-analyze"));
    cmd.args(args);
    for v in [
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
        "AWS_PROFILE",
        "AWS_SESSION_TOKEN",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
    ] {
        cmd.env_remove(v);
    }
    cmd.envs(vars.iter().copied());
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn moto_env(endpoint: &str) -> Vec<(&str, &str)> {
    vec![
        ("AWS_ENDPOINT", endpoint),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
    ]
}

fn analyze(args: &[&str], endpoint: &str) -> (i32, String, String) {
    analyze_env(args, &moto_env(endpoint))
}

/// Writes `objects` under `dir` and puts them under `prefix` in `store`, 32 at a time.
pub(crate) fn upload(
    store: &dyn object_store::ObjectStore,
    objects: &[(String, Vec<u8>)],
    prefix: &str,
    dir: &Path,
) {
    for (key, data) in objects {
        let p = dir.join(key);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let results: Vec<_> = futures::stream::iter(objects)
            .map(|(key, data)| async move {
                store
                    .put(
                        &object_store::path::Path::from(format!("{prefix}{key}")),
                        PutPayload::from(data.clone()),
                    )
                    .await
            })
            .buffer_unordered(32)
            .collect()
            .await;
        for r in results {
            r.unwrap();
        }
    });
}

/// The parts of a JSON report that do not name files.
pub(crate) fn comparable(mut r: Value) -> Value {
    let input = r["input"].as_object_mut().unwrap();
    for k in ["paths", "skipped_files", "bytes"] {
        input.remove(k);
    }
    for p in r["processes"].as_array_mut().unwrap() {
        p.as_object_mut().unwrap().remove("file");
    }
    r
}

#[test]
fn summary_export_and_diff_read_a_bucket_as_a_directory() {
    let Some(exe) = moto_server() else {
        return;
    };
    let moto = start(&exe);
    // The bucket (moto takes unsigned requests), then the objects, 32 at a time.
    let resp = ureq::put(format!("{}/{BUCKET}", moto.endpoint))
        .send_empty()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    // The same TLS stack as the analyzer's (reqwest has no provider of its own).
    seedance_analyze::read::remote::tls_provider();
    let store = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(&moto.endpoint)
        .with_allow_http(true)
        .with_bucket_name(BUCKET)
        .with_access_key_id("test")
        .with_secret_access_key("test")
        .with_region("us-east-1")
        .build()
        .unwrap();
    let objects = objects(OBJECTS);
    let dir = tempfile::tempdir().unwrap();
    upload(&store, &objects, "runs/1/", &dir.path().join("traces"));
    let local = dir.path().join("traces");
    let local = local.to_str().unwrap();
    let url = format!("s3://{BUCKET}/runs/1/");

    let (code, from_s3, err) = analyze(&["summary", "--format", "json", &url], &moto.endpoint);
    assert_eq!(code, 0, "{err}");
    let (code, from_disk, err) = analyze(&["summary", "--format", "json", local], &moto.endpoint);
    assert_eq!(code, 0, "{err}");
    let s3: Value = serde_json::from_str(&from_s3).unwrap();
    let disk: Value = serde_json::from_str(&from_disk).unwrap();
    assert_eq!(s3["input"]["files_read"], OBJECTS + 1);
    assert_eq!(s3["input"]["gzip_files"], 1);
    assert_eq!(s3["input"]["files_skipped"], 1);
    assert_eq!(
        s3["input"]["skipped_files"],
        serde_json::json!([format!("{url}README.md")])
    );
    assert_eq!(s3["input"]["records"], 3 * (OBJECTS + 1));
    assert_eq!(comparable(s3), comparable(disk));

    // One object by its URL.
    let one = format!("{url}node-03/seedance-00003.jsonl");
    let (code, text, err) = analyze(&["summary", &one], &moto.endpoint);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("1 process on 1 host"), "{text}");

    // export: every record once, as from the directory.
    let (code, lines, err) = analyze(&["export", &url], &moto.endpoint);
    assert_eq!(code, 0, "{err}");
    let (_, local_lines, _) = analyze(&["export", local], &moto.endpoint);
    assert_eq!(lines.lines().count(), OBJECTS + 1);
    assert_eq!(lines, local_lines);

    // diff of the bucket against the directory: nothing new.
    let (code, _, err) = analyze(&["diff", "--fail-on", "new", &url, local], &moto.endpoint);
    assert_eq!(code, 0, "{err}");

    // No certificate in the system's store (a minimal image without ca-certificates; here
    // SSL_CERT_FILE an empty file and SSL_CERT_DIR an empty directory): the client takes the
    // bundled roots instead, and reads the bucket as before (the HTTP client needs trust
    // roots to start, even for http://).
    let empty = dir.path().join("no-certs.pem");
    std::fs::write(&empty, "").unwrap();
    let no_certs = dir.path().join("no-certs");
    std::fs::create_dir(&no_certs).unwrap();
    let mut vars = moto_env(&moto.endpoint);
    vars.push(("SSL_CERT_FILE", empty.to_str().unwrap()));
    vars.push(("SSL_CERT_DIR", no_certs.to_str().unwrap()));
    let (code, bare, err) = analyze_env(&["summary", "--format", "json", &url], &vars);
    assert_eq!(code, 0, "{err}");
    assert_eq!(bare, from_s3);

    // A bucket that does not exist is an error naming the URL, exit 2.
    let (code, _, err) = analyze(&["summary", "s3://no-such-bucket/x/"], &moto.endpoint);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("s3://no-such-bucket/x/"), "{err}");
}
