//! A build without the `remote` feature (`cargo test -p seedance-analyze
//! --no-default-features`; every shipped build has it): an object-storage URL is refused with
//! exit 2 and one line saying so, never read as a local path that does not exist. With the
//! feature, `s3.rs` and `s3rver.rs` read buckets.
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
                 support (--no-default-features); build it with `cargo build --release`, or \
                 copy the traces to a local directory\n"
            ),
            "{cmd:?}: {err}"
        );
    }
}
