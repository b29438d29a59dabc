//! Which paths are object-storage URLs (`s3://`, `gs://`, `az://`, ...), known to every build;
//! reading them is the `remote` feature (src/read/remote.rs), on by default. A build made with
//! `--no-default-features` refuses a URL with one line saying so ([`unsupported`]), never
//! reads it as a local path.

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
        "{url}: this seedance-analyze was built without object-storage support \
         (--no-default-features); build it with `cargo build --release`, or copy the traces \
         to a local directory"
    )
}
