//! The differential corpus script's logic without a GPU: scripts/corpus/selftest.sh runs
//! scripts/corpus/run.sh against a fake nvcc and nvidia-smi and checks the verdicts it reaches
//! (counts, a build failure, a timeout, the GPU count, shim lines, the rules cases, the
//! budget), then corpus.py's own selftest of the stdout normalisation.

use seedance_e2e::optional_tool;
use std::path::Path;
use std::process::Command;

#[test]
fn corpus_script_reaches_its_verdicts_with_a_fake_toolchain() {
    if optional_tool("corpus_script", &["python3"], "SEEDANCE_REQUIRE_PYTHON").is_none() {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut c = Command::new("bash");
    c.arg(root.join("scripts/corpus/selftest.sh"))
        .current_dir(root);
    // Settings of run.sh that an ambient value could change.
    for k in [
        "OUT",
        "BUDGET_S",
        "GRACE_S",
        "JOBS",
        "RUN_JOBS",
        "FW_JOBS",
        "SAMPLE_TIMEOUT",
        "FW_TIMEOUT",
        "SAMPLES",
        "CORPUS_DIR",
        "CORPUS_GROUPS",
        "KEEP_WORK",
        "DRY_RUN",
        "CUDA_HOME",
    ] {
        c.env_remove(k);
    }
    let o = c.output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout.contains("corpus selftest: 0 failed"), "{stdout}");
}
