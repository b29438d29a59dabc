//! Traces in object storage against a second S3 implementation, over HTTPS: s3rver (npm
//! `s3rver`, a Node.js S3 server), which looks up the access key of every signed request
//! (it does not recompute SigV4 signatures), serving TLS with a server certificate of a CA
//! the test makes. The analyzer trusts that CA through the
//! system's trust store (`SSL_CERT_FILE`), as a private CA is trusted in a company's image;
//! so the shipped TLS stack (rustls with ring's provider) and request signing (ring) are
//! both exercised. The same traces go to the bucket and to a local directory, and `summary`
//! of `s3://bucket/prefix/` must say what it says of the directory.
//!
//! Without `s3rver` on `PATH` the test says `skipped: s3rver not found` on stderr and passes,
//! unless `SEEDANCE_REQUIRE_S3RVER=1`, when it fails (`.ci/run` installs s3rver and sets the
//! variable).

use crate::s3::{analyze_env, comparable, find_on_path, objects, upload, wait_for_line};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Stdio};

const OBJECTS: usize = 300;
const BUCKET: &str = "fleet-traces";
/// s3rver's one account.
const KEY_ID: &str = "S3RVER";
const SECRET: &str = "S3RVER";

/// The server, killed when dropped.
struct S3rver {
    child: Child,
    endpoint: String,
}

impl Drop for S3rver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A CA (PEM) and a server certificate and key (PEM) it signed for 127.0.0.1.
fn certificates() -> (String, String, String) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "seedance test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut leaf = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    leaf.subject_alt_names
        .push(SanType::IpAddress([127, 0, 0, 1].into()));
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    (ca_cert.pem(), cert.pem(), key.serialize_pem())
}

/// Starts s3rver on 127.0.0.1 (a port it picks and prints) with TLS and the bucket.
fn start(exe: &Path, dir: &Path, cert: &Path, key: &Path) -> S3rver {
    let mut child = Command::new(exe)
        .arg("-d")
        .arg(dir)
        .args(["-a", "127.0.0.1", "-p", "0", "--no-vhost-buckets"])
        .arg("--key")
        .arg(key)
        .arg("--cert")
        .arg(cert)
        .args(["--configure-bucket", BUCKET])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // "S3rver listening on 127.0.0.1:PORT" once it listens.
    let port = wait_for_line(child.stdout.take().unwrap(), |line| {
        line.trim()
            .strip_prefix("S3rver listening on 127.0.0.1:")
            .and_then(|addr| addr.parse::<u16>().ok())
    });
    let server = S3rver {
        child,
        endpoint: format!("https://127.0.0.1:{}", port.as_ref().copied().unwrap_or(0)),
    };
    if let Err(seen) = port {
        panic!("s3rver did not start:\n{seen}");
    }
    server
}

#[test]
fn summary_reads_a_bucket_over_https_with_signed_requests() {
    let Some(exe) = find_on_path(
        "s3rver",
        "SEEDANCE_REQUIRE_S3RVER",
        "s3rver::summary_reads_a_bucket_over_https_with_signed_requests",
        "npm s3rver: npm install s3rver, then node_modules/.bin on PATH",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = certificates();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, &ca).unwrap();
    std::fs::write(dir.path().join("cert.pem"), &cert).unwrap();
    std::fs::write(dir.path().join("key.pem"), &key).unwrap();
    let data = dir.path().join("s3rver");
    std::fs::create_dir(&data).unwrap();
    let server = start(
        &exe,
        &data,
        &dir.path().join("cert.pem"),
        &dir.path().join("key.pem"),
    );

    // The objects, through the same client the analyzer uses, trusting the test's CA only.
    seedance_analyze::read::remote::tls_provider();
    let options = object_store::ClientOptions::new()
        .with_no_system_certificates(true)
        .with_root_certificate(object_store::Certificate::from_pem(ca.as_bytes()).unwrap());
    let store = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(&server.endpoint)
        .with_bucket_name(BUCKET)
        .with_access_key_id(KEY_ID)
        .with_secret_access_key(SECRET)
        .with_region("us-east-1")
        .with_client_options(options)
        .build()
        .unwrap();
    let objects = objects(OBJECTS);
    let local = dir.path().join("traces");
    upload(&store, &objects, "runs/1/", &local);
    let local = local.to_str().unwrap();
    let url = format!("s3://{BUCKET}/runs/1/");

    let endpoint = server.endpoint.as_str();
    let run = |args: &[&str], key_id: &str, cert_file: &Path| {
        analyze_env(
            args,
            &[
                ("AWS_ENDPOINT", endpoint),
                ("AWS_ACCESS_KEY_ID", key_id),
                ("AWS_SECRET_ACCESS_KEY", SECRET),
                ("AWS_REGION", "us-east-1"),
                ("SSL_CERT_FILE", cert_file.to_str().unwrap()),
            ],
        )
    };

    // The CA in the system's trust store (SSL_CERT_FILE), s3rver's key: the bucket reads as
    // the directory does.
    let (code, from_s3, err) = run(&["summary", "--format", "json", &url], KEY_ID, &ca_file);
    assert_eq!(code, 0, "{err}");
    let (code, from_disk, err) = run(&["summary", "--format", "json", local], KEY_ID, &ca_file);
    assert_eq!(code, 0, "{err}");
    let s3: Value = serde_json::from_str(&from_s3).unwrap();
    let disk: Value = serde_json::from_str(&from_disk).unwrap();
    assert_eq!(s3["input"]["files_read"], OBJECTS + 1);
    assert_eq!(s3["input"]["gzip_files"], 1);
    assert_eq!(s3["input"]["files_skipped"], 1);
    assert_eq!(s3["input"]["records"], 3 * (OBJECTS + 1));
    assert_eq!(comparable(s3), comparable(disk));

    // A key s3rver does not know: it refuses the request, and the listing stops the command.
    let (code, _, err) = run(&["summary", &url], "NOSUCHKEY", &ca_file);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&url), "{err}");
    assert!(err.contains("InvalidAccessKeyId"), "{err}");

    // The test's CA not trusted (SSL_CERT_FILE a file that does not exist, so the system's
    // store is empty and the bundled Mozilla roots are used): the certificate is refused.
    let (code, _, err) = run(&["summary", &url], KEY_ID, &dir.path().join("none.pem"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&url), "{err}");
    assert!(
        err.contains("invalid peer certificate: UnknownIssuer"),
        "{err}"
    );
}
