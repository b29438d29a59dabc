//! Where the shim and the fake driver are, relative to the launcher's own executable, in
//! each layout it ships in:
//!
//! | Layout | Launcher | Shim | Fake driver |
//! | --- | --- | --- | --- |
//! | `cargo build --release` | `target/release/seedance-fix` | `target/release/libseedance_fix.so` | `target/release/libcuda.so` |
//! | release tarball (`scripts/release/package.sh`) | `bin/seedance-fix` | `lib/libseedance_fix.so` | `lib/fake-cuda/libcuda.so.1` |
//! | pip wheel in a virtualenv or `--user` (`pyproject.toml`) | `bin/seedance-fix` | `lib/python3.X/site-packages/seedance_fix/libseedance_fix.so` | `.../seedance_fix/fake-cuda/libcuda.so.1` |
//! | pip wheel, `pip install --target DIR` | `DIR/bin/seedance-fix` | `DIR/seedance_fix/libseedance_fix.so` | `DIR/seedance_fix/fake-cuda/libcuda.so.1` |
//!
//! The fake NVML (`crates/fake-nvml`, describing the same host) sits beside the fake
//! driver as `libnvidia-ml.so.1` (`fake-cuda/libnvidia-ml.so.1`), or in a cargo target
//! directory as `libnvidia_ml.so` ([`find_fake_nvml`]).
//!
//! (The wheel carries the shim as platform-library data, `seedance_fix/` in site-packages,
//! because `pip install --target` drops a wheel's other data files.)

use std::path::{Path, PathBuf};

/// The shim's file name.
pub const SHIM: &str = "libseedance_fix.so";

/// The directory of the running executable, symlinks resolved (a `pip` script or a
/// `/usr/local/bin` link points at the real install).
pub fn exe_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
    exe.parent().map(Path::to_path_buf)
}

/// The wheel's package directories for a launcher in `dir`: `../seedance_fix` (`--target`)
/// and `../lib/python*/site-packages/seedance_fix` (a virtualenv, `--user`), those that
/// exist, in name order.
fn wheel_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.join("../seedance_fix")];
    let mut pythons: Vec<PathBuf> = std::fs::read_dir(dir.join("../lib"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("python"))
                .map(|e| e.path().join("site-packages/seedance_fix"))
                .collect()
        })
        .unwrap_or_default();
    pythons.sort();
    out.extend(pythons);
    out
}

/// The places the shim is looked for, in order, for a launcher in `dir`.
pub fn shim_candidates(dir: &Path) -> Vec<PathBuf> {
    let mut c = vec![dir.join(SHIM), dir.join("../lib").join(SHIM)];
    c.extend(wheel_dirs(dir).into_iter().map(|d| d.join(SHIM)));
    c
}

/// The first existing shim among [`shim_candidates`], made absolute and clean, or the list
/// that was searched.
pub fn find_shim(dir: &Path) -> Result<PathBuf, Vec<PathBuf>> {
    let c = shim_candidates(dir);
    c.iter()
        .find(|p| p.is_file())
        .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
        .ok_or(c)
}

/// The fake driver for `--fake-driver`: a directory holding it as `libcuda.so.1` (the
/// name programs and the CUDA runtime load), or, in a cargo target directory where it is
/// `libcuda.so`, the file to link under that name.
pub enum FakeDriver {
    /// A directory to put first on `LD_LIBRARY_PATH`.
    Dir(PathBuf),
    /// `target/<profile>/libcuda.so` (the fake-cuda cdylib): needs a `libcuda.so.1` link.
    CargoFile(PathBuf),
}

/// Finds the fake driver for a launcher in `dir`.
pub fn find_fake_driver(dir: &Path) -> Result<FakeDriver, Vec<PathBuf>> {
    let mut dirs: Vec<PathBuf> = wheel_dirs(dir)
        .into_iter()
        .map(|d| d.join("fake-cuda"))
        .collect();
    dirs.push(dir.join("../lib/fake-cuda"));
    for d in &dirs {
        if d.join("libcuda.so.1").is_file() {
            return Ok(FakeDriver::Dir(
                std::fs::canonicalize(d).unwrap_or_else(|_| d.clone()),
            ));
        }
    }
    // In a cargo target directory the fake driver is the only libcuda.so beside the
    // launcher, and the shim is there too (a real driver is never installed there).
    let cargo = dir.join("libcuda.so");
    if cargo.is_file() && dir.join(SHIM).is_file() {
        return Ok(FakeDriver::CargoFile(
            std::fs::canonicalize(&cargo).unwrap_or(cargo),
        ));
    }
    let mut searched: Vec<PathBuf> = dirs.iter().map(|d| d.join("libcuda.so.1")).collect();
    searched.push(cargo);
    Err(searched)
}

/// The fake NVML's file name beside the fake driver, and in a cargo target directory.
pub const FAKE_NVML: [&str; 2] = ["libnvidia-ml.so.1", "libnvidia_ml.so"];

/// The fake NVML that goes with `driver`: `None` when this install has none (then the
/// shim finds no NVML, as on a host without a driver).
pub fn find_fake_nvml(driver: &FakeDriver) -> Option<PathBuf> {
    let (dir, name) = match driver {
        FakeDriver::Dir(d) => (d.as_path(), FAKE_NVML[0]),
        FakeDriver::CargoFile(f) => (f.parent()?, FAKE_NVML[1]),
    };
    let p = dir.join(name);
    p.is_file().then(|| std::fs::canonicalize(&p).unwrap_or(p))
}

/// `LD_PRELOAD` with `shim` first and what was there kept (entries are separated by spaces
/// or colons, ld.so(8)); an entry that already names the shim is not repeated.
pub fn preload_with(shim: &Path, existing: Option<&str>) -> String {
    let shim = shim.display().to_string();
    let mut out = vec![shim.clone()];
    for e in existing
        .unwrap_or("")
        .split([' ', ':'])
        .filter(|e| !e.is_empty())
    {
        if e != shim {
            out.push(e.to_string());
        }
    }
    out.join(":")
}

/// `dir` first on a colon-separated search path.
pub fn prepend_path(dir: &Path, existing: Option<&str>) -> String {
    match existing.filter(|e| !e.is_empty()) {
        Some(e) => format!("{}:{e}", dir.display()),
        None => dir.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preload_keeps_what_is_there_without_repeating_the_shim() {
        let s = Path::new("/opt/s/libseedance_fix.so");
        assert_eq!(preload_with(s, None), "/opt/s/libseedance_fix.so");
        assert_eq!(preload_with(s, Some("")), "/opt/s/libseedance_fix.so");
        assert_eq!(
            preload_with(s, Some("/a.so /b.so:/opt/s/libseedance_fix.so")),
            "/opt/s/libseedance_fix.so:/a.so:/b.so"
        );
    }

    #[test]
    fn prepend_to_an_empty_or_set_path() {
        let d = Path::new("/x");
        assert_eq!(prepend_path(d, None), "/x");
        assert_eq!(prepend_path(d, Some("")), "/x");
        assert_eq!(prepend_path(d, Some("/a:/b")), "/x:/a:/b");
    }

    #[test]
    fn finds_the_shim_in_each_layout() {
        for (exe, shim) in [
            ("release", "release/libseedance_fix.so"),
            ("tar/bin", "tar/lib/libseedance_fix.so"),
            (
                "venv/bin",
                "venv/lib/python3.11/site-packages/seedance_fix/libseedance_fix.so",
            ),
            ("site/bin", "site/seedance_fix/libseedance_fix.so"),
        ] {
            let root = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(root.path().join(exe)).unwrap();
            let s = root.path().join(shim);
            std::fs::create_dir_all(s.parent().unwrap()).unwrap();
            std::fs::write(&s, b"").unwrap();
            assert_eq!(
                find_shim(&root.path().join(exe)).unwrap(),
                std::fs::canonicalize(&s).unwrap()
            );
        }
        let root = tempfile::tempdir().unwrap();
        assert_eq!(find_shim(root.path()).unwrap_err().len(), 3);
    }

    #[test]
    fn finds_the_fake_nvml_beside_the_fake_driver() {
        let root = tempfile::tempdir().unwrap();
        let cargo = root.path().join("libcuda.so");
        std::fs::write(&cargo, b"").unwrap();
        let dir = FakeDriver::Dir(root.path().to_path_buf());
        let file = FakeDriver::CargoFile(cargo);
        assert_eq!(find_fake_nvml(&dir), None);
        assert_eq!(find_fake_nvml(&file), None);
        for name in FAKE_NVML {
            std::fs::write(root.path().join(name), b"").unwrap();
        }
        let real = std::fs::canonicalize(root.path()).unwrap();
        assert_eq!(find_fake_nvml(&dir), Some(real.join("libnvidia-ml.so.1")));
        assert_eq!(find_fake_nvml(&file), Some(real.join("libnvidia_ml.so")));
    }
}
