"""The PEP 517 build backend of seedance-fix (pyproject.toml: build-backend, backend-path).

maturin builds the launcher (crates/seedance-launch, bin bindings); on its own it would make
a wheel without the shim. This backend first builds the other four files with cargo and
stages them where pyproject.toml's `tool.maturin.data` points (target/wheel-data):

    scripts/seedance-analyze                        the analyzer, beside seedance-fix on PATH
    platlib/seedance_fix/libseedance_fix.so         the shim
    platlib/seedance_fix/fake-cuda/libcuda.so.1     the fake driver (--fake-driver)
    platlib/seedance_fix/fake-cuda/libnvidia-ml.so.1  the fake NVML, beside it

and then hands over to maturin's own PEP 517 hooks, so `pip install .` and `pip wheel .`
give the complete package, and the launcher finds the shim it was installed with
(crates/seedance-launch/src/locate.rs). scripts/release/wheel.sh is `pip wheel .` with the
settings below.

Two environment variables choose the build (docs/configuration.md, "Packaging"):

SEEDANCE_WHEEL_LINK
    `native` (unset or empty): link with this machine's C toolchain, as `cargo build` does.
    The wheel needs this machine's glibc and is tagged manylinux_2_N from the newest glibc
    symbol version its files need (readelf), so pip elsewhere refuses it on an older system
    instead of failing at run time. Right for `pip install .`: the wheel is for this machine,
    and nothing more is downloaded than maturin.
    `zig`: link with zig (PyPI `ziglang`, about 100 MB, fetched by pip into the build
    environment) against glibc 2.17's symbol versions, for a wheel tagged manylinux2014
    (manylinux_2_17) that installs on any Linux of that architecture from 2014 on (RHEL/Rocky
    7 and 8, Ubuntu 18.04, Amazon Linux 2). No container, no cross toolchain: zig links for
    aarch64 from x86-64 too.
    Anything else: one warning line, and native (as unset).

SEEDANCE_WHEEL_TARGET
    The Rust target triple the wheel is for; unset or empty: this machine's (rustc -vV).
    `aarch64-unknown-linux-gnu` (Grace Hopper, Grace Blackwell) from an x86-64 machine:
    with `zig`, nothing else is needed; with `native`, Debian's gcc-aarch64-linux-gnu and
    libc6-dev-arm64-cross (.cargo/config.toml names the linker). With `zig`, also
    `x86_64-unknown-linux-gnu` from an aarch64 machine. Another triple: one warning line,
    and this machine's (as unset).

Both are read at build time only; nothing in the installed package reads them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGE = ROOT / "target" / "wheel-data"
# The zig release the manylinux2014 wheels are built and tested with (.ci/run).
ZIG_REQUIREMENT = "ziglang>=0.17.1,<0.18"
# manylinux2014: the glibc of CentOS 7, the oldest that Rust's linux-gnu targets support.
ZIG_GLIBC = "2.17"
LINK_MODES = ("native", "zig")
# Triples a wheel can be built for: the shim and the launcher are Linux-only (glibc).
LINUX_TARGETS = ("x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu")


class BuildError(RuntimeError):
    pass


def _maturin():
    """maturin's PEP 517 module (a build requirement, so imported only by the hooks)."""
    import maturin

    return maturin


def _log(msg: str) -> None:
    print("seedance-fix build: " + msg, file=sys.stderr, flush=True)


def _notice(msg: str) -> None:
    """One line a person sees while pip runs this backend. pip shows nothing a backend
    prints unless `-v` (it captures the output and shows a spinner; the output only after a
    failure), so when a frontend captures both our stdout and stderr and a terminal is there,
    the line goes to the terminal itself; otherwise to stderr, like cargo's own output."""
    line = "seedance-fix build: " + msg
    if not sys.stdout.isatty() and not sys.stderr.isatty():
        try:
            with open("/dev/tty", "w") as tty:
                tty.write("\n" + line + "\n")
            return
        except OSError:
            pass
    print(line, file=sys.stderr, flush=True)


def _run(cmd: list, env: dict | None = None, step: str = "") -> None:
    """Runs a build command with its output passed through (cargo's `Compiling ...` lines:
    `pip install -v .` shows them as they come), after a notice of the step."""
    if step:
        _notice(step)
    _log("running " + " ".join(str(c) for c in cmd))
    r = subprocess.run([str(c) for c in cmd], cwd=ROOT, env=env)
    if r.returncode != 0:
        raise BuildError(f"{cmd[0]} failed with exit status {r.returncode}")


def _host_triple() -> str:
    out = subprocess.run(["rustc", "-vV"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"^host: (\S+)$", out, re.M)
    if not m:
        raise BuildError("rustc -vV printed no host triple")
    return m.group(1)


def _settings() -> tuple:
    """(link mode, target triple, host triple) from SEEDANCE_WHEEL_LINK and _TARGET.

    A value this backend does not know gives one warning line on stderr and the default
    (native; this machine's triple), as unset: the wheel is then tagged for what it was
    built as (manylinux_2_N from its files' glibc needs), so pip still refuses it where it
    would not run."""
    link = os.environ.get("SEEDANCE_WHEEL_LINK", "") or "native"
    if link not in LINK_MODES:
        _log(
            f"warning: SEEDANCE_WHEEL_LINK={link!r} is not one of {', '.join(LINK_MODES)}; "
            "using native (docs/configuration.md)"
        )
        link = "native"
    host = _host_triple()
    target = os.environ.get("SEEDANCE_WHEEL_TARGET", "") or host
    allowed = LINUX_TARGETS if link == "zig" else (host, "aarch64-unknown-linux-gnu")
    if target != host and target not in allowed:
        _log(
            f"warning: SEEDANCE_WHEEL_TARGET={target!r}: a {link} build on {host} makes wheels "
            f"for {', '.join(dict.fromkeys((host,) + tuple(allowed)))} only; using {host} "
            "(docs/configuration.md)"
        )
        target = host
    if link == "zig" and target not in LINUX_TARGETS:
        raise BuildError(f"SEEDANCE_WHEEL_LINK=zig builds for {', '.join(LINUX_TARGETS)}, not {target}")
    return link, target, host


def _zig_env(target: str) -> dict:
    """The environment that makes cargo (and maturin after it) compile C and link with zig
    against glibc 2.17: CC, CXX, AR, RANLIB and the linker for `target`, as small scripts
    under target/zig/ that call maturin's `zig cc` wrapper (cargo-zigbuild's, built into
    maturin: it adapts rustc's linker arguments to zig). The scripts keep their paths from
    one build to the next (cargo rebuilds everything when the linker's path changes, and
    pip's build environment is a new temporary directory each time); only their contents
    name this build's python and maturin."""
    maturin_exe = shutil.which("maturin")
    if maturin_exe is None:
        raise BuildError("maturin is not on PATH (it is a build requirement: pyproject.toml)")
    try:
        import ziglang  # noqa: F401  (the package pip installs from get_requires_for_build_wheel)
    except ImportError:
        raise BuildError(
            f"SEEDANCE_WHEEL_LINK=zig needs {ZIG_REQUIREMENT!r} in the build environment "
            "(pip installs it; with --no-build-isolation, install it yourself)"
        ) from None
    zig_target = target.replace("-unknown-", "-") + "." + ZIG_GLIBC
    wrappers = ROOT / "target" / "zig" / target
    wrappers.mkdir(parents=True, exist_ok=True)
    head = (
        "#!/bin/sh\n"
        "# Written by packaging/seedance_build.py for each build: zig, for the wheel.\n"
        f"export CARGO_ZIGBUILD_ZIG_COMMAND='{sys.executable}' CARGO_ZIGBUILD_ZIG_COMMAND_ARGS='-m ziglang'\n"
    )
    tools = {
        "cc": f"zig cc -- -g -fno-sanitize=all -target {zig_target}",
        "c++": f"zig c++ -- -g -fno-sanitize=all -target {zig_target}",
        "ar": "zig ar --",
        "ranlib": "zig ranlib --",
    }
    for name, args in tools.items():
        path = wrappers / name
        path.write_text(head + f"exec '{maturin_exe}' {args} \"$@\"\n")
        path.chmod(0o755)
    t = target.replace("-", "_")
    return {
        f"CC_{t}": str(wrappers / "cc"),
        f"CXX_{t}": str(wrappers / "c++"),
        f"AR_{t}": str(wrappers / "ar"),
        f"RANLIB_{t}": str(wrappers / "ranlib"),
        f"CARGO_TARGET_{t.upper()}_LINKER": str(wrappers / "cc"),
        # The release profile keeps debug information; the linker drops it (there is no
        # strip for another architecture without binutils for it). Symbols stay.
        "CARGO_PROFILE_RELEASE_STRIP": "debuginfo",
    }


def _glibc_needs(path: Path) -> int | None:
    """The newest GLIBC_2.N symbol version `path` needs (N), or None without readelf."""
    readelf = shutil.which("readelf")
    if readelf is None:
        return None
    out = subprocess.run([readelf, "--version-info", "--wide", str(path)], capture_output=True, text=True).stdout
    minors = [int(m) for m in re.findall(r"GLIBC_2\.(\d+)", out)]
    return max(minors, default=17)


def _stage(link: str, target: str, host: str) -> tuple:
    """Builds the shim, the analyzer, the fake driver and the fake NVML and stages them.
    Returns (the environment for maturin, maturin's arguments)."""
    env = dict(os.environ)
    cargo_target = []
    maturin_args = ["--strip"]
    tdir = Path(env.get("CARGO_TARGET_DIR") or ROOT / "target")
    if not tdir.is_absolute():
        tdir = ROOT / tdir
    rel = tdir / "release"
    if link == "zig":
        env.update(_zig_env(target))
        # A target directory of its own for each zig target: with --target, build scripts
        # and procedural macros go to <target dir>/release, and the zig linker setting
        # reaches them when the target is the host's, so sharing that directory with the
        # native build (or the other zig target) would rebuild them, and all that depends on
        # them, at every switch.
        tdir = tdir / ("zig-" + target)
        env["CARGO_TARGET_DIR"] = str(tdir)
    if link == "zig" or target != host:
        # zig: an explicit target even for this machine's architecture, so that build
        # scripts and procedural macros (built for the host without --target) are not
        # linked for glibc 2.17 and the files go to target/<triple>/release, apart from
        # the native build's.
        cargo_target = ["--target", target]
        maturin_args += ["--target", target]
        rel = tdir / target / "release"
    # Three cargo runs, each selecting what maturin's or an ordinary build selects, so cargo's
    # feature unification is the same and their dependencies are built once: the analyzer
    # with the launcher (which maturin then builds against the same dependencies), the shim
    # alone (as scripts/ci/callgrind-hotpath.sh and the release tarball build it), the fakes.
    cargo = ["cargo", "build", "--release", *cargo_target]
    what = f"{target}, {'zig, glibc ' + ZIG_GLIBC if link == 'zig' else 'this machine'}"
    _run(
        cargo + ["-p", "seedance-launch", "-p", "seedance-analyze"],
        env,
        f"cargo build 1/3: launcher and analyzer ({what}; several minutes the first time, "
        "pip install -v shows cargo's progress)",
    )
    _run(cargo + ["-p", "seedance-shim"], env, "cargo build 2/3: the shim")
    _run(cargo + ["-p", "fake-cuda", "-p", "fake-nvml"], env, "cargo build 3/3: the fake driver and fake NVML")

    shutil.rmtree(STAGE, ignore_errors=True)
    fake = STAGE / "platlib" / "seedance_fix" / "fake-cuda"
    (STAGE / "scripts").mkdir(parents=True)
    fake.mkdir(parents=True)
    staged = [
        (rel / "seedance-analyze", STAGE / "scripts" / "seedance-analyze"),
        (rel / "libseedance_fix.so", STAGE / "platlib" / "seedance_fix" / "libseedance_fix.so"),
        (rel / "libcuda.so", fake / "libcuda.so.1"),
        # The fake NVML beside the fake driver: --fake-driver puts that directory first on
        # the library path, and the shim loads libnvidia-ml.so.1 from it.
        (rel / "libnvidia_ml.so", fake / "libnvidia-ml.so.1"),
    ]
    for src, dst in staged:
        shutil.copyfile(src, dst)
        dst.chmod(0o755)
    if link == "native":
        # The release profile keeps debug information; the wheel drops the DWARF sections
        # (symbols stay), as maturin --strip does for the launcher.
        strip = "strip" if target == host else target.replace("-unknown-", "-") + "-strip"
        for _, dst in staged:
            if shutil.which(strip) is None or subprocess.run([strip, "--strip-debug", str(dst)]).returncode != 0:
                _log(f"note: could not strip {dst} ({strip}); kept as built")

    if link == "zig":
        maturin_args += ["--compatibility", "manylinux2014"]
    else:
        needs = [_glibc_needs(dst) for _, dst in staged]
        if None in needs:
            _log("note: readelf not found; the wheel is tagged linux (no manylinux claim)")
            maturin_args += ["--compatibility", "linux"]
        else:
            # maturin knows no manylinux tag below the architecture's first (2.17); it
            # checks the launcher against the tag itself.
            maturin_args += ["--compatibility", f"manylinux_2_{max(max(needs), 17)}"]
    return env, maturin_args


def _with_args(config_settings, args: list) -> dict:
    """config_settings for maturin's hooks: our arguments, then the caller's own
    (`-C maturin.build-args=...` or MATURIN_PEP517_ARGS)."""
    settings = dict(config_settings or {})
    settings["maturin.build-args"] = args + _maturin().get_maturin_pep517_args(config_settings)
    settings.pop("build-args", None)
    return settings


def _clean_errors(hook):
    """A BuildError ends the hook with its message, not a traceback."""

    def run(*args, **kwargs):
        try:
            return hook(*args, **kwargs)
        except BuildError as e:
            sys.exit(f"seedance-fix build: {e}")

    run.__name__ = hook.__name__
    return run


@_clean_errors
def get_requires_for_build_wheel(config_settings=None):
    link, _, _ = _settings()
    extra = [ZIG_REQUIREMENT] if link == "zig" else []
    return _maturin().get_requires_for_build_wheel(config_settings) + extra


# No prepare_metadata_for_build_wheel: maturin's reads `tool.maturin.data`, which exists only
# after build_wheel has staged the files (on a clean checkout it stopped the build with "No such
# data directory"), so the frontend takes the metadata from the wheel build_wheel makes.


@_clean_errors
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    link, target, host = _settings()
    _log(f"link={link} target={target}" + (f" (glibc {ZIG_GLIBC} symbols)" if link == "zig" else ""))
    env, args = _stage(link, target, host)
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        _notice("maturin: the launcher and the wheel")
        return _maturin().build_wheel(wheel_directory, _with_args(config_settings, args), metadata_directory)
    finally:
        os.environ.clear()
        os.environ.update(saved)


class UnsupportedOperation(Exception):
    """PEP 517's way for a backend to say it makes no source distribution."""


# No source distribution: maturin's would hold the launcher's crates only (it rewrites the
# workspace's members to them), not the shim and the fakes, so a wheel built from it would
# fail. Build from the checkout (`pip install .`, `pip wheel .`, `python -m build --wheel`).
# No editable install either: the package is compiled files, which an editable install
# could not follow; pip says so for `pip install -e .`.
def get_requires_for_build_sdist(config_settings=None):
    return []


def build_sdist(sdist_directory, config_settings=None):
    raise UnsupportedOperation(
        "seedance-fix makes no source distribution (maturin's would lack the shim's crates); "
        "build the wheel from the checkout: pip wheel . or python -m build --wheel"
    )


if __name__ == "__main__":
    # python3 packaging/seedance_build.py: the settings this environment gives, checked.
    try:
        print("link=%s target=%s host=%s" % _settings())
    except BuildError as e:
        sys.exit(f"seedance-fix build: {e}")
