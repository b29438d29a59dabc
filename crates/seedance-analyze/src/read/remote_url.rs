//! Which paths are object-storage URLs (`s3://`, `gs://`, `az://`, ...), known to every build;
//! reading them needs the `remote` feature (src/read/remote.rs). Without it a URL is refused
//! with one line naming the feature ([`unsupported`]), never read as a local path.

/// Whether `s` is an object-storage URL rather than a local path.
pub fn is_url(s: &str) -> bool {
    [
        "s3://", "s3a://", "gs://", "az://", "azure://", "abfs://", "abfss://", "adl://",
    ]
    .iter()
    .any(|p| s.starts_with(p))
}

/// The error for `url` in a build without the `remote` feature.
pub fn unsupported(url: &str) -> String {
    format!(
        "{url}: this seedance-analyze was built without object-storage support; build it with \
         `cargo build --release --features seedance-analyze/remote`, or copy the traces to a \
         local directory"
    )
}
