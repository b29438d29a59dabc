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
