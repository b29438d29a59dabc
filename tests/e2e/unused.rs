//! A process that never touches CUDA pays nothing visible: no output, no trace file.

use seedance_e2e::Run;

#[test]
fn no_output_and_no_trace_without_cuda() {
    let r = Run::new("no_cuda", true).finish();
    assert_eq!(r.output.status.code(), Some(0));
    assert_eq!(r.stdout(), "strlen=8\n");
    assert_eq!(r.stderr(), "");
    assert_eq!(r.trace_files, 0);
    assert!(r.driver_calls.is_empty());
}

/// Driver calls made from another library's destructor at exit (as the shared libcudart
/// makes them) are in the exit summary, which is written after every destructor ran.
#[test]
fn exit_summary_counts_calls_from_library_destructors() {
    let r = Run::new("teardown_main", true).finish();
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    assert_eq!(r.stdout(), "setup=0\n");
    assert_eq!(r.summary_count("cuCtxSynchronize_v2"), (2, 0));
    assert_eq!(r.summary_count("cuInit"), (1, 0));
}
