//! A build without the `remote` feature (the default, and the wheel's): an object-storage
//! URL is refused with exit 2 and one line that names the feature, never read as a local
//! path that does not exist. With the feature, `s3.rs` reads a bucket on a moto server.
#![cfg(not(feature = "remote"))]

use crate::run;

#[test]
fn an_object_storage_url_names_the_missing_feature() {
    for cmd in [&["summary"][..], &["export"][..]] {
        let mut args = cmd.to_vec();
        args.push("s3://traces/fleet/");
        let (code, _, err) = run(&args);
        assert_eq!(code, 2, "{cmd:?}: {err}");
        assert!(
            err.contains(
                "s3://traces/fleet/: this seedance-analyze was built without object-storage \
                 support; build it with `cargo build --release --features \
                 seedance-analyze/remote`"
            ),
            "{cmd:?}: {err}"
        );
    }
}
