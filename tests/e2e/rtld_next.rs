//! `dlsym(RTLD_NEXT, ..)` resolves relative to its caller. The shim's exported `dlsym` must
//! keep that true: a preloaded library that interposes `which()` must reach the program's
//! own `which()`, not itself, exactly as without the shim.

use seedance_e2e::{artifacts, Run};

#[test]
fn preloaded_library_still_finds_its_next_symbol() {
    let a = artifacts();
    let probe = a.bin_dir.join("libnext_probe.so");
    let plain = Run::new("next_main", false)
        .env("LD_PRELOAD", &probe)
        .finish();
    assert_eq!(plain.stdout(), "probe>base\n");
    let chained = format!("{} {}", a.shim.display(), probe.display());
    let shimmed = Run::new("next_main", false)
        .env("LD_PRELOAD", chained)
        .finish();
    assert_eq!(
        shimmed.output.status.code(),
        Some(0),
        "{}",
        shimmed.stderr()
    );
    assert_eq!(shimmed.stdout(), "probe>base\n");
}
