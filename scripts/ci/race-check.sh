#!/usr/bin/env bash
# Thread checking of the shim: the multi-threaded stress program
# (tests/programs/stress.c) with the shim built under ThreadSanitizer, then, for the record,
# valgrind's helgrind. Prints a verdict; exit 0 = no race found by TSan, 1 = races, 2 = could
# not run. Not in CI: it needs RUSTC_BOOTSTRAP for -Zsanitizer on the stable toolchain and
# builds a second copy of the shim (about a minute on 2 cores); the runs take ~15 s.
#
# How (docs/reliability.md, "Thread checking", has the findings and why each piece is there):
# * the shim and every Rust crate it links are built with -Zsanitizer=thread into target/tsan
#   (the shared target/ is untouched); std itself is not instrumented (no rust-src, so no
#   -Zbuild-std), which is what tests/tsan/tsan.supp is about;
# * stress.c is linked with the Rust toolchain's own TSan runtime (librustc-*_rt.tsan.a, the one
#   matching the instrumentation; gcc's libtsan lacks __tsan_memcpy), exported with -rdynamic
#   so the preloaded shim binds to it;
# * tests/tsan/dlsym_gate.c is preloaded in front of the shim: the runtime looks its
#   interceptors up with dlsym while it initialises, and must not enter the instrumented shim
#   before its own thread state exists;
# * the fake driver is the normal, uninstrumented one.
#
# * tests/programs/pinned_threads.c, built the same way, runs the race table's paths: each
#   thread copies from its own pinned buffer on its own stream with event records and
#   waits, and makes a race of its own every RACE rounds (fix mode orders each one); the run
#   must give the exact call total and every race ordered.
#
# RACE_CHECK_LOADS overrides the stress loads ("threads:calls ..."), RACE_CHECK_PINNED the
# pinned-copy loads ("threads:rounds:race ..."); RACE_CHECK_DIR the work
# directory (default target/race-check).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
triple=x86_64-unknown-linux-gnu
work=${RACE_CHECK_DIR:-target/race-check}
rm -rf "$work"
mkdir -p "$work/drv" "$work/sym"
work=$(cd "$work" && pwd)
loads=${RACE_CHECK_LOADS:-"4:2000 8:20000 32:5000"}
pinned_loads=${RACE_CHECK_PINNED:-"8:5000:100 12:2000:50"}
# Every 10 calls a thread also allocates and frees another thread's allocation (stress.c's
# STRESS_ALLOC_EVERY): allocations held per thread and taken across threads.
alloc_every=10

say() { echo "race-check: $*"; }

rt=$(ls "$(rustc --print sysroot)/lib/rustlib/$triple/lib/"librustc-*_rt.tsan.a 2>/dev/null | head -1 || true)
[ -n "$rt" ] || { say "cannot run: the Rust toolchain has no TSan runtime for $triple"; exit 2; }

say "building the shim with -Zsanitizer=thread into target/tsan"
RUSTC_BOOTSTRAP=1 RUSTFLAGS="-Zsanitizer=thread -Cunsafe-allow-abi-mismatch=sanitizer" \
  CARGO_TARGET_DIR=target/tsan cargo build -q -p seedance-shim --target "$triple"
shim=$root/target/tsan/$triple/debug/libseedance_fix.so
cargo build -q -p seedance-shim -p fake-cuda
cp target/debug/libcuda.so "$work/drv/libcuda.so.1"
cp target/debug/libcuda.so "$work/drv/libcuda.so"

cc -g -O1 -o "$work/stress_tsan" tests/programs/stress.c -L"$work/drv" -lcuda \
  -Wl,--whole-archive "$rt" -Wl,--no-whole-archive -rdynamic -lpthread -ldl -lm -lstdc++
cc -g -O1 -o "$work/stress" tests/programs/stress.c -L"$work/drv" -lcuda -lpthread
cc -g -O1 -o "$work/pinned_tsan" tests/programs/pinned_threads.c -Itests/programs -L"$work/drv" -lcuda \
  -Wl,--whole-archive "$rt" -Wl,--no-whole-archive -rdynamic -lpthread -ldl -lm -lstdc++
cc -shared -fPIC -O1 -o "$work/libdlsym_gate.so" tests/tsan/dlsym_gate.c -ldl
symbolize=symbolize=0
if [ -x /usr/bin/llvm-symbolizer ] && cc -static -O1 -o "$work/sym/llvm-symbolizer" tests/tsan/symbolizer.c 2>/dev/null; then
  symbolize=external_symbolizer_path=$work/sym/llvm-symbolizer
fi

fail=0
total_suppressed=0
for load in $loads; do
  t=${load%%:*}
  n=${load##*:}
  name=stress-${t}x$n
  mkdir -p "$work/$name/traces"
  start=$(date +%s.%N)
  set +e
  env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$work/drv" FAKE_CUDA_DEVICE_COUNT=2 \
    SEEDANCE_QUIET=1 SEEDANCE_TRACE_DIR="$work/$name/traces" \
    SEEDANCE_METRICS_FILE="$work/$name/metrics.prom" SEEDANCE_METRICS_INTERVAL=1 \
    STRESS_ALLOC_EVERY=$alloc_every LD_PRELOAD="$work/libdlsym_gate.so:$shim" \
    TSAN_OPTIONS="suppressions=$root/tests/tsan/tsan.supp $symbolize print_suppressions=1 log_path=$work/$name/tsan exitcode=66" \
    "$work/stress_tsan" "$t" "$n" >"$work/$name/stdout" 2>"$work/$name/stderr"
  rc=$?
  set -e
  secs=$(echo "$(date +%s.%N) - $start" | bc)
  reports=$(cat "$work/$name"/tsan.* 2>/dev/null | grep -c 'WARNING: ThreadSanitizer' || true)
  # A run with nothing to report or suppress writes no log: no file to read is 0 (pipefail
  # would otherwise end the script here).
  suppressed=$({ cat "$work/$name"/tsan.* 2>/dev/null || true; } | awk '/Matched [0-9]+ suppressions/{m=1; next} m && /^ *[0-9]+ /{s+=$1} END{print s+0}')
  total_suppressed=$((total_suppressed + suppressed))
  want="ok_calls=$((t * (2 + n + 3 * (n / 1000) + 2 * (n / alloc_every) - 1)))"
  got=$(cat "$work/$name/stdout")
  launches=$(grep -ho '"cuLaunchKernel":{"calls":[0-9]*' "$work/$name"/traces/*.jsonl 2>/dev/null | grep -o '[0-9]*$' || true)
  dropped=$(grep -ho '"dropped_records":[0-9]*' "$work/$name"/traces/*.jsonl 2>/dev/null | grep -o '[0-9]*$' || true)
  line="$name: exit $rc, ${secs%??????}s, $reports TSan reports, $suppressed suppressed; $got, cuLaunchKernel $launches, dropped $dropped"
  if [ "$rc" -ne 0 ] || [ "$reports" -ne 0 ] || [ "$got" != "$want" ] || [ "$launches" != "$((t * n))" ] || [ "$dropped" != 0 ] || [ ! -s "$work/$name/metrics.prom" ]; then
    say "FAIL $line (want $want, launches $((t * n)), a metrics file; reports in $work/$name/tsan.*)"
    fail=1
  else
    say "ok   $line"
  fi
done

# pinned_ok_calls T N RACE: pinned_threads.c's successful calls (a copy, a record and a wait
# per round, a synchronize every 64th, and a query every 128th, a racing copy every RACE).
pinned_ok_calls() {
  local t=$1 n=$2 race=$3
  echo $((t * (3 * n + n / 64 + n / 128 + n / race)))
}
for load in $pinned_loads; do
  IFS=: read -r t n race <<<"$load"
  name=pinned-${t}x$n
  mkdir -p "$work/$name"
  rm -f "$work/$name"/tsan.*
  set +e
  env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$work/drv" FAKE_CUDA_DEVICE_COUNT=2 SEEDANCE_QUIET=1 \
    LD_PRELOAD="$work/libdlsym_gate.so:$shim" \
    TSAN_OPTIONS="suppressions=$root/tests/tsan/tsan.supp $symbolize print_suppressions=1 log_path=$work/$name/tsan exitcode=66" \
    "$work/pinned_tsan" "$t" "$n" "$race" >"$work/$name/stdout" 2>"$work/$name/stderr"
  rc=$?
  set -e
  reports=$(cat "$work/$name"/tsan.* 2>/dev/null | grep -c 'WARNING: ThreadSanitizer' || true)
  suppressed=$({ cat "$work/$name"/tsan.* 2>/dev/null || true; } | awk '/Matched [0-9]+ suppressions/{m=1; next} m && /^ *[0-9]+ /{s+=$1} END{print s+0}')
  total_suppressed=$((total_suppressed + suppressed))
  want="ok_calls=$(pinned_ok_calls "$t" "$n" "$race") intact=$((t * (n / race)))"
  got=$(cat "$work/$name/stdout")
  line="$name (a race every $race): exit $rc, $reports TSan reports, $suppressed suppressed; $got"
  if [ "$rc" -ne 0 ] || [ "$reports" -ne 0 ] || [ "$got" != "$want" ]; then
    say "FAIL $line (want $want; reports in $work/$name/tsan.*)"
    fail=1
  else
    say "ok   $line"
  fi
done

# Control: the same small run without the suppressions must show the known false positives,
# or the detector was not live (e.g. the shim was not loaded, or not instrumented). They come
# from interleavings, so a run may show none: up to three tries.
mkdir -p "$work/control/traces"
control=0
for _try in 1 2 3; do
  env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$work/drv" FAKE_CUDA_DEVICE_COUNT=2 SEEDANCE_QUIET=1 \
    SEEDANCE_TRACE_DIR="$work/control/traces" LD_PRELOAD="$work/libdlsym_gate.so:$shim" \
    TSAN_OPTIONS="$symbolize log_path=$work/control/tsan exitcode=0" \
    "$work/stress_tsan" 4 2000 >/dev/null 2>&1 || true
  control=$({ cat "$work/control"/tsan.* 2>/dev/null || true; } | grep -c 'WARNING: ThreadSanitizer' || true)
  [ "$control" -eq 0 ] || break
done
if [ "$control" -eq 0 ]; then
  say "FAIL control: no report at all without suppressions; TSan was not watching the shim"
  fail=1
else
  say "ok   control: $control reports without suppressions (the known false positives), so TSan was live"
fi

# helgrind, for the record: it knows only pthread primitives, and Rust's std, parking_lot and
# crossbeam synchronise with futexes and atomics, so it floods, with the shim or without.
if command -v valgrind >/dev/null; then
  for shimmed in no yes; do
    pre=()
    [ "$shimmed" = yes ] && pre=(LD_PRELOAD="$root/target/debug/libseedance_fix.so")
    env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$work/drv" FAKE_CUDA_DEVICE_COUNT=2 SEEDANCE_QUIET=1 "${pre[@]}" \
      valgrind --tool=helgrind --log-file="$work/helgrind-shim-$shimmed.log" "$work/stress" 4 200 >/dev/null
    say "helgrind (informational), stress 4x200, shim $shimmed: $(grep -o 'ERROR SUMMARY: .*' "$work/helgrind-shim-$shimmed.log")"
  done
fi

if [ "$fail" -ne 0 ]; then
  say "FAIL: ThreadSanitizer reported races or a stress run went wrong (see above)"
  exit 1
fi
say "PASS: ThreadSanitizer found no race in the shim under the stress loads $loads and the pinned-copy loads $pinned_loads ($total_suppressed reports suppressed as false positives from uninstrumented std and the fake driver: tests/tsan/tsan.supp)"
