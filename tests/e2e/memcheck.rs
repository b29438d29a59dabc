//! Memory errors: the test programs run under valgrind memcheck with the shim
//! preloaded, and memcheck finds nothing.
//!
//! Each case runs twice with the same environment and arguments: natively with the shim
//! preloaded, then under `valgrind --tool=memcheck`, with `LD_PRELOAD` passed through valgrind's
//! environment (valgrind adds its own preloads in front; the client gets the shim). The test
//! asserts, per case:
//!
//! * no memcheck error of any kind in any object of the process (the shim, the fake driver, the
//!   fake runtime, the program): invalid read or write, use of an uninitialised value
//!   (conditional jump, syscall parameter), invalid or mismatched free, overlapping copy, and
//!   "definitely lost" leaks (memory no pointer reaches any more);
//! * the shim really ran under valgrind: the valgrind run wrote one trace with a
//!   `session_start` and an `exit_summary` whose per-function counts, repairs and fallbacks
//!   equal the native run's, and the same events;
//! * the program behaved the same: exit code, stdout and stderr (the shim's own lines; valgrind
//!   writes to its log and XML files) equal the native run's, and for single-threaded programs
//!   the fake driver saw the same calls in the same order, apart from the device-list queries
//!   of the shim's session record (made on a background thread, so their number and place
//!   depend on timing).
//!
//! Leaks: "still reachable" (statics, `OnceLock`s, thread-locals of live threads, the trace
//! writer) and "possibly lost" (hashbrown tables, whose only pointer points into the middle of
//! the allocation) are not errors. "Definitely lost" is, except in the forked child of
//! `fork_child` (the parent's other threads vanish at `fork`, and what only their stacks
//! referenced looks lost; memory errors are still checked there) and one fixture leak
//! suppressed in `tests/valgrind/memcheck.supp` (the fake NVML's static, unmapped when the
//! shim's NVML handle `dlclose`s it). The suppression file holds no read, write,
//! uninitialised-value or free suppression.
//!
//! Without valgrind on the machine the test says so and passes, unless
//! `SEEDANCE_REQUIRE_VALGRIND=1` (CI installs valgrind). `scripts/ci/memcheck.sh` runs one
//! program the same way by hand and keeps the reports.

use seedance_e2e::{Finished, Run};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Exit code valgrind gives the program when memcheck reported an error; none of the test
/// programs uses it.
const ERROR_EXIT: i32 = 86;

struct Case {
    name: &'static str,
    program: &'static str,
    args: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
    /// The fake NVML on the library path.
    nvml: bool,
    /// Count "definitely lost" leaks as errors.
    leaks: bool,
    /// Compare the fake driver's call log (single-threaded programs only).
    driver_log: bool,
}

const fn case(
    name: &'static str,
    program: &'static str,
    args: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
) -> Case {
    Case {
        name,
        program,
        args,
        env,
        nvml: false,
        leaks: true,
        driver_log: true,
    }
}

const LAUNCH: &[(&str, &str)] = &[("FAKE_CUDA_FUNC_MAX_THREADS", "256")];
const LAUNCH_PRE: &[(&str, &str)] = &[
    ("FAKE_CUDA_FUNC_MAX_THREADS", "256"),
    ("SEEDANCE_VALIDATE", "pre"),
];
const ALLOC: &[(&str, &str)] = &[("FAKE_CUDA_FREE_MEM", "1073741824,")];
const CVD1: &[(&str, &str)] = &[("CUDA_VISIBLE_DEVICES", "1")];

/// The loading paths (`linked` also repairs a bad ordinal without NVML), a device fault
/// repaired with NVML, the shared runtime, fork, a reduced stress run, and the launch,
/// allocation and lifetime scenarios that reach the most shim code (explanations, `pre`
/// validation, repairs, handles used after their context, the exit report). Each valgrind run
/// costs 2.5 to 4 s of CPU, so scenarios that take the same paths as one here are left out.
const CASES: &[Case] = &[
    case("linked", "linked", &[], &[]),
    case("cudart_style", "cudart_style", &[], &[]),
    case("dlsym_style", "dlsym_style", &[], &[]),
    Case {
        nvml: true,
        ..case("ordinals_nvml", "ordinals", &["1"], CVD1)
    },
    case("set_device", "set_device", &["1"], CVD1),
    Case {
        leaks: false,
        ..case("fork_child", "fork_child", &[], &[])
    },
    Case {
        driver_log: false,
        ..case(
            "stress_4x2000",
            "stress",
            &["4", "2000"],
            &[("SEEDANCE_QUIET", "1")],
        )
    },
    case("launch_block", "launch_faults", &["block"], LAUNCH),
    case("launch_destroyed", "launch_faults", &["destroyed"], LAUNCH),
    case(
        "launch_params_pre",
        "launch_faults",
        &["params_and_extra"],
        LAUNCH_PRE,
    ),
    case("alloc_oom", "alloc_faults", &["oom"], ALLOC),
    case("alloc_create", "alloc_faults", &["create"], ALLOC),
    case(
        "lifetime_destroy_before_sync",
        "lifetime",
        &["destroy_before_sync"],
        &[],
    ),
    case("lifetime_atexit_free", "lifetime", &["atexit_free"], &[]),
    case("lifetime_pinned_free", "lifetime", &["pinned_free"], &[]),
    case("lifetime_leave", "lifetime", &["leave"], &[]),
    case("lifetime_after_deinit", "lifetime", &["after_deinit"], &[]),
    Case {
        driver_log: false,
        ..case(
            "hazards_recycle_thread",
            "hazards",
            &["recycle_thread"],
            &[],
        )
    },
];

fn run(c: &Case) -> Run {
    // Valgrind runs a program 20-50 times slower: NVML's initialisation alone can take
    // longer than the shim's default 2 s wait for it (SEEDANCE_NVML_TIMEOUT), after which it
    // goes on without NVML and says so. Both runs get a generous wait, so they compare.
    let mut r = Run::new(c.program, true)
        .args(c.args)
        .env("SEEDANCE_NVML_TIMEOUT", "120000");
    for (k, v) in c.env {
        r = r.env(k, v);
    }
    if c.nvml {
        r = r.with_nvml();
    }
    r
}

fn valgrind() -> Option<PathBuf> {
    seedance_e2e::optional_tool(
        "memcheck::programs_under_memcheck_have_no_memory_errors",
        &["valgrind"],
        "SEEDANCE_REQUIRE_VALGRIND",
    )
}

fn suppressions() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("valgrind/memcheck.supp")
}

fn memcheck_args(valgrind: &Path, out: &Path, leaks: bool) -> Vec<String> {
    vec![
        valgrind.display().to_string(),
        "--tool=memcheck".into(),
        format!("--error-exitcode={ERROR_EXIT}"),
        "--xml=yes".into(),
        format!("--xml-file={}/vg.%p.xml", out.display()),
        format!("--log-file={}/vg.%p.log", out.display()),
        "--leak-check=full".into(),
        "--show-leak-kinds=definite".into(),
        format!(
            "--errors-for-leak-kinds={}",
            if leaks { "definite" } else { "none" }
        ),
        // The fake NVML is dlclosed before the leak check; keep its symbols for the
        // suppression and for readable stacks.
        "--keep-debuginfo=yes".into(),
        // Inlined frames cost 15% of each run (the debug shim's DWARF); scripts/ci/memcheck.sh
        // keeps them, for a closer look at a failure.
        "--read-inline-info=no".into(),
        "--num-callers=30".into(),
        format!("--suppressions={}", suppressions().display()),
    ]
}

/// One memcheck error from valgrind's XML output.
struct VgError {
    kind: String,
    what: String,
    frames: Vec<String>,
    in_shim: bool,
}

fn tag<'a>(s: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let start = s.find(&open)? + open.len();
    let len = s[start..].find(&close)?;
    Some(&s[start..start + len])
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// Errors and suppression counts in a memcheck XML file (a forked child appends its own
/// document to its parent's file). The frames are the error's own stack (where the bad
/// access or the leaked allocation happened); `auxwhat` lines (e.g. where the block was
/// allocated) are appended to `what`.
fn parse_xml(xml: &str) -> (Vec<VgError>, Vec<(String, u64)>) {
    let mut errors = Vec::new();
    for block in xml.split("<error>").skip(1) {
        let block = block.split("</error>").next().unwrap_or(block);
        let mut what = unescape(
            tag(block, "what")
                .or_else(|| tag(block, "xwhat").and_then(|x| tag(x, "text")))
                .unwrap_or(""),
        );
        for aux in block.split("<auxwhat>").skip(1) {
            what.push_str("; ");
            what.push_str(&unescape(aux.split("</auxwhat>").next().unwrap_or("")));
        }
        let mut in_shim = false;
        let frames = tag(block, "stack")
            .unwrap_or("")
            .split("<frame>")
            .skip(1)
            .map(|f| {
                let obj = tag(f, "obj").unwrap_or("?");
                in_shim |= obj.ends_with("libseedance_fix.so");
                let func = unescape(tag(f, "fn").unwrap_or("???"));
                match (tag(f, "file"), tag(f, "line")) {
                    (Some(file), Some(line)) => format!("{func} ({file}:{line}) [{obj}]"),
                    _ => format!("{func} [{obj}]"),
                }
            })
            .collect();
        errors.push(VgError {
            kind: tag(block, "kind").unwrap_or("?").to_string(),
            what,
            frames,
            in_shim,
        });
    }
    let suppressed = xml
        .split("<suppcounts>")
        .skip(1)
        .flat_map(|s| s.split("<pair>").skip(1))
        .filter_map(|p| {
            let count = tag(p, "count")?.trim().parse::<u64>().ok()?;
            Some((unescape(tag(p, "name")?.trim()), count))
        })
        .collect();
    (errors, suppressed)
}

/// The parser on valgrind 3.19's own output for an invalid read and a double free in a
/// program, and a suppressed leak.
#[test]
fn memcheck_xml_is_parsed() {
    let xml = r#"<?xml version="1.0"?>
<valgrindoutput>
<error>
  <unique>0x0</unique>
  <tid>1</tid>
  <kind>InvalidRead</kind>
  <what>Invalid read of size 4</what>
  <stack>
    <frame>
      <ip>0x109191</ip>
      <obj>/tmp/mc/bad</obj>
      <fn>main</fn>
      <dir>/tmp/mc</dir>
      <file>bad.c</file>
      <line>4</line>
    </frame>
  </stack>
  <auxwhat>Address 0x512d048 is 0 bytes after a block of size 8 alloc'd</auxwhat>
  <stack>
    <frame>
      <ip>0x48417B4</ip>
      <obj>/usr/libexec/valgrind/vgpreload_memcheck-amd64-linux.so</obj>
      <fn>malloc</fn>
    </frame>
  </stack>
</error>
<error>
  <unique>0x1</unique>
  <tid>1</tid>
  <kind>InvalidFree</kind>
  <what>Invalid free() / delete / delete[] / realloc()</what>
  <stack>
    <frame>
      <ip>0x484417B</ip>
      <obj>/usr/libexec/valgrind/vgpreload_memcheck-amd64-linux.so</obj>
      <fn>free</fn>
    </frame>
    <frame>
      <ip>0x4A3CDFD</ip>
      <obj>/work/main/target/debug/libseedance_fix.so</obj>
      <fn>&lt;seedance_fix::X as core::ops::Drop&gt;::drop</fn>
    </frame>
  </stack>
</error>
<status>
  <state>FINISHED</state>
</status>
<suppcounts>
  <pair>
    <count>1</count>
    <name>fake-nvml-host-state-unmapped-by-dlclose</name>
  </pair>
</suppcounts>
</valgrindoutput>
"#;
    let (errors, suppressed) = parse_xml(xml);
    assert_eq!(
        suppressed,
        [("fake-nvml-host-state-unmapped-by-dlclose".to_string(), 1)]
    );
    assert_eq!(errors.len(), 2);
    assert_eq!(errors[0].kind, "InvalidRead");
    assert_eq!(
        errors[0].what,
        "Invalid read of size 4; Address 0x512d048 is 0 bytes after a block of size 8 alloc'd"
    );
    assert_eq!(errors[0].frames, ["main (bad.c:4) [/tmp/mc/bad]"]);
    assert!(!errors[0].in_shim);
    assert_eq!(errors[1].kind, "InvalidFree");
    assert_eq!(
        errors[1].frames[1],
        "<seedance_fix::X as core::ops::Drop>::drop [/work/main/target/debug/libseedance_fix.so]"
    );
    assert!(errors[1].in_shim);
}

#[test]
fn stderr_normalized_for_thread_ids_and_host_addresses() {
    assert_eq!(
        normalize("memory 0x5572d9fcad30 (made on thread 32110), device 0x700000000000, context 0x5eedc0000100"),
        "memory <host> (made on thread <tid>), device 0x700000000000, context 0x5eedc0000100"
    );
    assert_eq!(
        normalize("this process (pid 4321) was forked from pid 4320 after"),
        "this process (pid <pid>) was forked from pid <pid> after"
    );
    assert_eq!(
        normalize("cuMemFreeHost waited 286.9 ms for them; waited for"),
        "cuMemFreeHost waited <time> for them; waited for"
    );
}

/// What the trace says about a run, without times, pids and addresses: the exit summary's
/// counts, repairs and fallbacks, and every event name (sorted).
/// A forked child's trace (`fork_child`: a `forked_after_init` fault, written by the child)
/// is counted apart, by its events.
fn trace_digest(r: &Finished) -> Result<(Value, Vec<String>), String> {
    let children: Vec<&Value> = r
        .events("lifetime_fault")
        .into_iter()
        .filter(|e| e["kind"] == "forked_after_init")
        .map(|e| &e["pid"])
        .collect();
    let own = |e: &&Value| !children.contains(&&e["pid"]);
    let starts = r.events("session_start").into_iter().filter(own).count();
    let summaries = r.events("exit_summary");
    if r.trace_files != 1 + children.len() || starts != 1 || summaries.len() != 1 {
        return Err(format!(
            "expected one trace with one session_start and one exit_summary, got {} files, \
             {starts} session_start, {} exit_summary (was the shim loaded?)",
            r.trace_files,
            summaries.len()
        ));
    }
    let s = summaries[0];
    let digest = serde_json::json!({
        "functions": s["functions"],
        "repairs": s["repairs"],
        "fallbacks": s["fallbacks"],
        "dropped_records": s["dropped_records"],
        "procaddr_unmatched": s["procaddr_unmatched"],
    });
    let mut events: Vec<String> = r
        .records
        .iter()
        .map(|e| {
            let event = e["event"].as_str().unwrap_or("?");
            if own(&e) {
                event.to_string()
            } else {
                format!("child {event}")
            }
        })
        .collect();
    events.sort();
    Ok((digest, events))
}

/// The shim's stderr lines with what differs between two runs of the same program replaced:
/// thread ids (`thread 1234`), process ids (`pid 1234`), host addresses (`0x55d0c2a1b2c0`; the fake driver's
/// device addresses, `0x7000..`, and handles, `0x5eed..`, are kept) and how long a call
/// blocked (`waited 45 us`).
fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        // Process ids (a forked child's explanation names its own and its parent's).
        if let Some(after) = rest.strip_prefix("pid ") {
            let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            if digits > 0 {
                out.push_str("pid <pid>");
                rest = &after[digits..];
                continue;
            }
        }
        if let Some(after) = rest.strip_prefix("thread ") {
            let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            if digits > 0 {
                out.push_str("thread <tid>");
                rest = &after[digits..];
                continue;
            }
        }
        // How long a call blocked (`waited 45 us for`, `waited 286.9 ms for`).
        if let Some(after) = rest.strip_prefix("waited ") {
            if after.starts_with(|c: char| c.is_ascii_digit()) {
                if let Some(end) = after.find(" for ") {
                    out.push_str("waited <time>");
                    rest = &after[end..];
                    continue;
                }
            }
        }
        if let Some(after) = rest.strip_prefix("0x") {
            let len = after.len()
                - after
                    .trim_start_matches(|c: char| c.is_ascii_hexdigit())
                    .len();
            let hex = &after[..len];
            let fake = hex.starts_with("5eed") || (hex.len() == 12 && hex.starts_with("70"));
            if len > 0 && !fake {
                out.push_str("<host>");
                rest = &after[len..];
                continue;
            }
        }
        let ch = rest.chars().next().unwrap();
        out.push(ch);
        rest = &rest[ch.len_utf8()..];
    }
    out
}

/// The fake driver's call log without the device-list queries (count, handles, name, bus id,
/// UUID, memory, one attribute, the driver version) that the shim makes for its session
/// record on a background thread, and again for a device explanation if the record is not
/// ready yet: how many there are, and where they fall, depends on timing. Every other call,
/// the program's and the explanations', must be the same, in the same order.
fn program_calls(calls: &[String]) -> Vec<&str> {
    const DEVICE_LIST: &[&str] = &[
        "cuDriverGetVersion ",
        "cuDeviceGetCount ",
        "cuDeviceGet ordinal=",
        "cuDeviceGetName ",
        "cuDeviceGetPCIBusId ",
        "cuDeviceGetUuid_v2 ",
        "cuDeviceTotalMem_v2 ",
        "cuDeviceGetAttribute attrib=20 ",
    ];
    calls
        .iter()
        .map(String::as_str)
        .filter(|l| !DEVICE_LIST.iter().any(|q| l.starts_with(q)))
        .collect()
}

struct Outcome {
    native: Duration,
    under_valgrind: Duration,
    /// Suppressions that matched, ours (tests/valgrind/memcheck.supp) and valgrind's
    /// defaults, with counts.
    suppressed: Vec<(String, u64)>,
}

fn check(c: &Case, valgrind: &Path) -> Result<Outcome, String> {
    let t = Instant::now();
    let native = run(c).finish();
    let native_time = t.elapsed();
    let out = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let vg = run(c)
        .wrapped_in(&memcheck_args(valgrind, out.path(), c.leaks))
        .finish();
    let vg_time = t.elapsed();

    let mut problems = Vec::new();
    let mut xml_files = 0;
    let mut finished = 0;
    let mut errors = Vec::new();
    let mut suppressed = Vec::new();
    for entry in std::fs::read_dir(out.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "xml") {
            let xml = std::fs::read_to_string(&path).unwrap();
            xml_files += 1;
            finished += xml.matches("<state>FINISHED</state>").count();
            let (e, s) = parse_xml(&xml);
            errors.extend(
                e.into_iter()
                    .filter(|e| c.leaks || !e.kind.starts_with("Leak_")),
            );
            suppressed.extend(s);
        }
    }
    if xml_files == 0 || finished == 0 {
        let logs: String = std::fs::read_dir(out.path())
            .unwrap()
            .filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
            .collect();
        problems.push(format!(
            "valgrind did not finish ({xml_files} XML files); stderr:\n{}\nlogs:\n{logs}",
            vg.stderr()
        ));
    }
    for e in &errors {
        let mut s = format!(
            "memcheck {}{}: {}",
            e.kind,
            if e.in_shim { " [shim in stack]" } else { "" },
            e.what
        );
        for f in e.frames.iter().take(16) {
            s.push_str("\n      at ");
            s.push_str(f);
        }
        problems.push(s);
    }
    if vg.output.status.code() != native.output.status.code() {
        problems.push(format!(
            "exit status {:?} under valgrind, {:?} natively ({ERROR_EXIT} = memcheck errors)",
            vg.output.status, native.output.status
        ));
    }
    if vg.stdout() != native.stdout() {
        problems.push(format!(
            "stdout differs\nnative:\n{}\nvalgrind:\n{}",
            native.stdout(),
            vg.stdout()
        ));
    }
    if normalize(&vg.stderr()) != normalize(&native.stderr()) {
        problems.push(format!(
            "stderr differs\nnative:\n{}\nvalgrind:\n{}",
            native.stderr(),
            vg.stderr()
        ));
    }
    if c.driver_log && program_calls(&vg.driver_calls) != program_calls(&native.driver_calls) {
        problems.push(format!(
            "driver calls differ\nnative: {:#?}\nvalgrind: {:#?}",
            native.driver_calls, vg.driver_calls
        ));
    }
    match (trace_digest(&native), trace_digest(&vg)) {
        (Ok(n), Ok(v)) if n == v => {}
        (Ok(n), Ok(v)) => problems.push(format!("trace differs\nnative: {n:#?}\nvalgrind: {v:#?}")),
        (Err(e), _) => problems.push(format!("native run: {e}")),
        (_, Err(e)) => problems.push(format!("valgrind run: {e}")),
    }
    if problems.is_empty() {
        Ok(Outcome {
            native: native_time,
            under_valgrind: vg_time,
            suppressed,
        })
    } else {
        Err(problems.join("\n  "))
    }
}

/// Every case under memcheck, on as many threads as the machine has cores; all failures are
/// reported together.
#[test]
fn programs_under_memcheck_have_no_memory_errors() {
    if seedance_e2e::target::skip_under_emulation(
        "valgrind runs x86-64 code only; it cannot run the aarch64 programs or qemu's guest",
    ) {
        return;
    }
    let Some(valgrind) = valgrind() else {
        return;
    };
    seedance_e2e::artifacts();
    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Result<Outcome, String>)>> = Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 4);
    // SEEDANCE_MEMCHECK_CASES=name,name runs only those cases (to look at one again).
    let only = std::env::var("SEEDANCE_MEMCHECK_CASES").ok();
    let selected: Vec<usize> = (0..CASES.len())
        .filter(|&i| {
            only.as_deref()
                .is_none_or(|o| o.split(',').any(|n| n == CASES[i].name))
        })
        .collect();
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(&i) = selected.get(k) else { break };
                let c = &CASES[i];
                let r = check(c, &valgrind);
                results.lock().unwrap().push((i, r));
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|(i, _)| *i);
    let mut failures = Vec::new();
    for (i, r) in &results {
        match r {
            Ok(o) => eprintln!(
                "memcheck: {:<30} ok  native {:>5} ms, valgrind {:>5.1} s, suppressed: {}",
                CASES[*i].name,
                o.native.as_millis(),
                o.under_valgrind.as_secs_f64(),
                if o.suppressed.is_empty() {
                    "none".to_string()
                } else {
                    o.suppressed
                        .iter()
                        .map(|(n, c)| format!("{n} x{c}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
            Err(e) => failures.push(format!("{}:\n  {e}", CASES[*i].name)),
        }
    }
    eprintln!(
        "memcheck: {} cases on {workers} threads in {:.1} s",
        selected.len(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(results.len(), selected.len());
    assert!(
        failures.is_empty(),
        "{} of {} cases failed under memcheck (scripts/ci/memcheck.sh reruns one with inlined \
         frames in the stacks):\n{}",
        failures.len(),
        selected.len(),
        failures.join("\n")
    );
}
