//! Traces in object storage: `s3://bucket/prefix/`, `gs://bucket/prefix/`,
//! `az://container/prefix/` (and the other URL forms the `object_store` crate parses), read
//! through `object_store` with the credentials chain of each cloud's own tools: the
//! `AWS_*`, `GOOGLE_*` and `AZURE_*` variables, profiles and instance or workload identity
//! as `object_store`'s builders read them (`AmazonS3Builder::from_env` and its siblings).
//!
//! A URL names a prefix (every object under it, recursively, in key order, as a directory
//! is walked) or, when nothing is under it, one object. Objects are fetched in parallel
//! ([`CONCURRENT_GETS`] at a time) in batches of at most [`BATCH_OBJECTS`] objects and
//! [`BATCH_BYTES`] bytes, each batch parsed on all cores by the same reader as local files
//! while the next one downloads: memory holds about two batches, whatever the size of the
//! prefix. Each object is named by its URL in the report.
//!
//! HTTPS is rustls with ring's cryptography ([`tls_provider`]), the same provider that signs
//! the requests; the trust roots are the system's when it has any, else the Mozilla roots
//! built into the binary ([`client_options`]).

use crate::read::input::RecordHook;
use crate::Aggregate;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{Certificate, ClientConfigKey, ClientOptions, ObjectStore, ObjectStoreExt};
use rayon::prelude::*;
use std::sync::Arc;

/// Objects fetched at once.
pub const CONCURRENT_GETS: usize = 32;

/// Most objects parsed in one batch.
pub const BATCH_OBJECTS: usize = 256;

/// Most bytes (as listed) fetched for one batch; an object larger than this is a batch of
/// its own.
pub const BATCH_BYTES: u64 = 256 << 20;

pub use crate::read::remote_url::is_url;

/// One object to read.
#[derive(Debug, Clone)]
pub struct Object {
    /// Its URL, as the report names it.
    pub name: String,
    location: ObjectPath,
    size: u64,
}

/// A bucket (container) and the objects of one URL in it.
pub struct Listing {
    store: Arc<dyn ObjectStore>,
    runtime: Arc<tokio::runtime::Runtime>,
    /// The objects, in key order.
    pub objects: Vec<Object>,
}

/// Installs ring's cryptography as rustls's provider for this process, once: reqwest is
/// built without one of its own (no aws-lc, which needs cmake and nasm and does not link for
/// glibc 2.17 with zig), and object_store signs with ring too. A provider already installed
/// is kept.
pub fn tls_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Whether the system's trust store has no certificate: `SSL_CERT_FILE` and `SSL_CERT_DIR`
/// when set, else the usual files (`/etc/ssl/certs/ca-certificates.crt`, ...), as
/// `rustls-native-certs` finds them. A minimal container image without `ca-certificates`
/// has none.
fn system_roots_missing() -> bool {
    static MISSING: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *MISSING.get_or_init(|| rustls_native_certs::load_native_certs().certs.is_empty())
}

/// The HTTP client's settings for a store whose variables start with `prefix` (`AWS_`,
/// `GOOGLE_`, `AZURE_`): the client keys among them (`AWS_ALLOW_HTTP`, `AWS_PROXY_URL`,
/// `GOOGLE_TIMEOUT`, ...) read as the store's builder reads them, and the trust roots. The
/// roots are the system's when it has any (so a private CA added there, or named by
/// `SSL_CERT_FILE`, is trusted); without any, the Mozilla roots bundled in the binary
/// (`webpki-root-certs`), so that a minimal image still reaches the public clouds.
fn client_options(prefix: &str) -> ClientOptions {
    let mut options = ClientOptions::new();
    for (k, v) in std::env::vars_os() {
        let (Some(k), Some(v)) = (k.to_str(), v.to_str()) else {
            continue;
        };
        let key = k
            .strip_prefix(prefix)
            .and_then(|rest| rest.to_ascii_lowercase().parse::<ClientConfigKey>().ok());
        if let Some(key) = key {
            options = options.with_config(key, v);
        }
    }
    if system_roots_missing() {
        options = options.with_no_system_certificates(true);
        for der in webpki_root_certs::TLS_SERVER_ROOT_CERTS {
            if let Ok(cert) = Certificate::from_der(der.as_ref()) {
                options = options.with_root_certificate(cert);
            }
        }
    }
    options
}

/// An error with the causes its message leaves out: object_store says "error sending
/// request" for a connection it could not make, and only the chain of sources says why (a
/// certificate the trust roots do not cover, a refused connection).
fn describe(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}

fn store_for(url: &url::Url) -> Result<Box<dyn ObjectStore>, String> {
    use object_store::ObjectStoreScheme as S;
    let (scheme, _) = S::parse(url).map_err(|e| e.to_string())?;
    let s = url.as_str();
    tls_provider();
    let built: Result<Box<dyn ObjectStore>, object_store::Error> = match scheme {
        S::AmazonS3 => object_store::aws::AmazonS3Builder::from_env()
            .with_client_options(client_options("AWS_"))
            .with_url(s)
            .build()
            .map(|b| Box::new(b) as Box<dyn ObjectStore>),
        S::GoogleCloudStorage => object_store::gcp::GoogleCloudStorageBuilder::from_env()
            .with_client_options(client_options("GOOGLE_"))
            .with_url(s)
            .build()
            .map(|b| Box::new(b) as Box<dyn ObjectStore>),
        S::MicrosoftAzure => object_store::azure::MicrosoftAzureBuilder::from_env()
            .with_client_options(client_options("AZURE_"))
            .with_url(s)
            .build()
            .map(|b| Box::new(b) as Box<dyn ObjectStore>),
        _ => return Err(format!("{s}: not an object-storage URL")),
    };
    built.map_err(|e| describe(&e))
}

/// Lists what `url` names (see the module documentation).
pub fn list(url: &str) -> Result<Listing, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("{url}: {e}"))?;
    let store: Arc<dyn ObjectStore> =
        Arc::from(store_for(&parsed).map_err(|e| format!("{url}: {e}"))?);
    let (_, prefix) =
        object_store::ObjectStoreScheme::parse(&parsed).map_err(|e| format!("{url}: {e}"))?;
    let prefix = ObjectPath::parse(prefix.as_ref()).map_err(|e| format!("{url}: {e}"))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the object-storage client: {e}"))?;
    // The URL up to the bucket: `s3://bucket/`.
    let base = {
        let s = parsed.as_str();
        let after = s.find("://").map_or(0, |i| i + 3);
        match s[after..].find('/') {
            Some(i) => s[..after + i + 1].to_string(),
            None => format!("{s}/"),
        }
    };
    let objects = runtime.block_on(async {
        let p = (!prefix.as_ref().is_empty()).then_some(&prefix);
        let mut metas: Vec<object_store::ObjectMeta> = store
            .list(p)
            .try_collect()
            .await
            .map_err(|e| format!("{url}: {}", describe(&e)))?;
        if metas.is_empty() && p.is_some() {
            // Nothing under it: the URL names one object.
            metas.push(
                store
                    .head(&prefix)
                    .await
                    .map_err(|e| format!("{url}: {}", describe(&e)))?,
            );
        }
        metas.sort_by(|a, b| a.location.cmp(&b.location));
        Ok::<_, String>(metas)
    })?;
    Ok(Listing {
        store,
        runtime: Arc::new(runtime),
        objects: objects
            .into_iter()
            .map(|m| Object {
                name: format!("{base}{}", m.location),
                location: m.location,
                size: m.size,
            })
            .collect(),
    })
}

/// The objects in batches of at most [`BATCH_OBJECTS`] and [`BATCH_BYTES`].
fn batches(objects: &[Object]) -> Vec<&[Object]> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0u64);
    for (i, o) in objects.iter().enumerate() {
        if i > start && (i - start >= BATCH_OBJECTS || bytes + o.size > BATCH_BYTES) {
            out.push(&objects[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += o.size;
    }
    if start < objects.len() {
        out.push(&objects[start..]);
    }
    out
}

impl Listing {
    /// Reads every object with `read` (given its name and bytes, or the error that kept it
    /// from being fetched), batch by batch, and returns the results in key order.
    pub fn read_all<T: Send>(
        &self,
        read: impl Fn(&str, Result<&[u8], String>) -> T + Sync,
    ) -> Vec<T> {
        let mut out = Vec::with_capacity(self.objects.len());
        let fetch = |batch: &[Object]| -> Vec<Result<bytes::Bytes, String>> {
            let store = self.store.clone();
            let locations: Vec<ObjectPath> = batch.iter().map(|o| o.location.clone()).collect();
            self.runtime.block_on(
                futures::stream::iter(locations)
                    .map(move |l| {
                        let store = store.clone();
                        async move {
                            match store.get(&l).await {
                                Ok(r) => r.bytes().await.map_err(|e| describe(&e)),
                                Err(e) => Err(describe(&e)),
                            }
                        }
                    })
                    .buffered(CONCURRENT_GETS)
                    .collect::<Vec<_>>(),
            )
        };
        let batches = batches(&self.objects);
        // One batch downloads while the one before it is parsed.
        let mut next = batches.first().map(|b| fetch(b));
        for (i, batch) in batches.iter().enumerate() {
            let data = next.take().unwrap_or_default();
            let (parsed, fetched) = rayon::join(
                || {
                    batch
                        .par_iter()
                        .zip(data.par_iter())
                        .map(|(o, d)| read(&o.name, d.as_deref().map_err(Clone::clone)))
                        .collect::<Vec<T>>()
                },
                || batches.get(i + 1).map(|b| fetch(b)),
            );
            out.extend(parsed);
            next = fetched;
        }
        out
    }
}

/// Reads the objects `url` names into one aggregate, as [`crate::read::input::analyze_paths`]
/// reads files; `hook` is not used (see [`read_object`] for one object with a hook).
pub fn analyze_url(url: &str, options: &crate::Options) -> Result<Aggregate, String> {
    let listing = list(url)?;
    Ok(listing
        .read_all(|name, data| read_object(name, data, options, None))
        .into_iter()
        .fold(Aggregate::default(), Aggregate::merge))
}

/// One fetched object read as a file, or counted as unreadable.
pub fn read_object(
    name: &str,
    data: Result<&[u8], String>,
    options: &crate::Options,
    hook: Option<RecordHook<'_>>,
) -> Aggregate {
    match data {
        Ok(d) => crate::read::input::read_bytes_with(name, d, options, hook),
        Err(e) => {
            let mut agg = Aggregate::default();
            agg.counters.files_seen += 1;
            agg.counters.note_unreadable(name, e);
            agg
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_paths() {
        assert!(is_url("s3://b/p/"));
        assert!(is_url("gs://b"));
        assert!(is_url("az://c/p"));
        assert!(!is_url("/data/s3://x"));
        assert!(!is_url("traces/"));
    }

    #[test]
    fn batches_keep_within_their_bounds() {
        let o = |size| Object {
            name: String::new(),
            location: ObjectPath::from("x"),
            size,
        };
        let objects: Vec<Object> = (0..600).map(|_| o(1)).collect();
        let sizes: Vec<usize> = batches(&objects).iter().map(|b| b.len()).collect();
        assert_eq!(sizes, [256, 256, 88]);
        let big = vec![o(BATCH_BYTES), o(1), o(BATCH_BYTES - 1), o(1)];
        let sizes: Vec<usize> = batches(&big).iter().map(|b| b.len()).collect();
        assert_eq!(sizes, [1, 2, 1]);
        assert!(batches(&[]).is_empty());
    }
}
