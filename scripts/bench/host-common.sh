# The prologue the shim's host-only benchmarks share (scripts/ci/callgrind-hotpath.sh,
# scripts/bench/cachegrind-evicted.sh, scripts/bench/host-threads.sh). Sourced, not run, from the
# repository root or with $root set to it:
#
#   shim_or_release [PATH]      # $shim: PATH made absolute, else a release build's
#   build_null_driver DIR       # DIR/libcuda.so.1 (and libcuda.so) from tests/programs/null_driver.c

# shim_or_release [PATH]: $shim, the absolute path of PATH; without one, the tree's release
# build (built now).
shim_or_release() {
  if [ -n "${1:-}" ]; then
    shim=$(readlink -f "$1")
  else
    cargo build --release --quiet -p seedance-shim
    shim=$PWD/target/release/libseedance_fix.so
  fi
}

# build_null_driver DIR: the null driver (every call returns at once) as DIR/libcuda.so.1,
# with the libcuda.so link the linker looks for. Returns cc's status.
build_null_driver() {
  cc -O2 -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$1/libcuda.so.1" \
    "${root:-.}/tests/programs/null_driver.c" && ln -sf libcuda.so.1 "$1/libcuda.so"
}
