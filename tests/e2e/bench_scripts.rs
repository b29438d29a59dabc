//! The GPU benchmark scripts' parts that run without a GPU: scripts/bench/gpu-threads.sh against
//! the fake driver (the program scripts/gpu/threads_bench.c built with `cc`, the paired
//! schedule, the raw file and the table), and the statistics of
//! scripts/gpu/threads_stats.py on synthetic data (`--selftest`).

use seedance_e2e::{artifacts, optional_tool};
use std::path::Path;
use std::process::Command;

/// Why scripts/bench/host-threads.sh does not run under emulation.
const HOST_THREADS_NOT_EMULATED: &str = "scripts/bench/host-threads.sh builds the null driver and \
     its program with the host's cc, which cannot load the shim built for the emulated target";

/// The file `name` a benchmark script wrote into its output directory.
fn written(out: &tempfile::TempDir, name: &str) -> String {
    std::fs::read_to_string(out.path().join(name)).unwrap()
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// Runs a benchmark script on the shim under test with `settings` and every other setting
/// of the scripts cleared (an ambient value cannot change what the tests assert), `CI=true`
/// set as CI services set it (the scripts must not read it); asserts it succeeded and
/// returns its output directory and stdout. `None` (said) without python3, or under
/// emulation (`why_not_emulated`).
fn run_script(
    script: &str,
    why_not_emulated: &str,
    settings: &[(&str, &str)],
) -> Option<(tempfile::TempDir, String)> {
    run_script_on(&artifacts().shim, script, why_not_emulated, settings)
}

/// [`run_script`] on the shim build at `shim`.
fn run_script_on(
    shim: &Path,
    script: &str,
    why_not_emulated: &str,
    settings: &[(&str, &str)],
) -> Option<(tempfile::TempDir, String)> {
    optional_tool("bench_scripts", &["python3"], "SEEDANCE_REQUIRE_PYTHON")?;
    if seedance_e2e::target::skip_under_emulation(why_not_emulated) {
        return None;
    }
    let out = tempfile::tempdir().unwrap();
    let mut c = Command::new("bash");
    c.arg(root().join(script))
        .arg(shim)
        .current_dir(root())
        .env("OUT", out.path())
        .env("CI", "true");
    for k in [
        "MODES",
        "SEED",
        "WARMUP",
        "SCHED",
        "BUDGET_S",
        "INTERVAL",
        "FAKE_DRIVER_DIR",
        "ROUNDS",
        "THREADS",
        "ITERATIONS",
        "OPS",
        "ALLOC_EVERY",
        "CPUS",
        "INTERLEAVE",
        "PAIRS",
        "PLAIN_BETWEEN",
        "ROWS",
        "PERF",
        "LINKED",
        "BEFORE",
        "VARIANTS",
        "BLOCKS",
        "GAPS",
        "GAP_SPIN",
        "KINDS",
        "MODE",
        "N",
    ] {
        c.env_remove(k);
    }
    c.envs(settings.iter().copied());
    let o = c.output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    Some((out, stdout))
}

#[test]
fn threads_benchmark_statistics_selftest() {
    let Some(py) = optional_tool("bench_scripts", &["python3"], "SEEDANCE_REQUIRE_PYTHON") else {
        return;
    };
    let o = Command::new(py)
        .arg(root().join("scripts/gpu/threads_stats.py"))
        .arg("--selftest")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// [`run_script`] of a script that runs scripts/bench/gpu-threads.sh against the fake driver
/// (`FAKE_DRIVER_DIR` added to `settings`). The script builds threads_bench.c with this
/// machine's cc, as it runs on the GPU machine, so it links against a fake driver of the
/// host's architecture only (`None` under emulation).
fn run_on_fake_driver(
    script: &str,
    settings: &[(&str, &str)],
) -> Option<(tempfile::TempDir, String)> {
    let fake = artifacts().fake_dir.to_string_lossy().into_owned();
    let mut all = vec![("FAKE_DRIVER_DIR", fake.as_str())];
    all.extend_from_slice(settings);
    run_script(
        script,
        "scripts/bench/gpu-threads.sh builds its program with the host's cc, which cannot link the \
         fake driver built for the emulated target",
        &all,
    )
}

#[test]
fn threads_benchmark_runs_its_paired_schedule_on_the_fake_driver() {
    let Some((out, stdout)) = run_on_fake_driver(
        "scripts/bench/gpu-threads.sh",
        &[("ROUNDS", "2"), ("THREADS", "1 3"), ("ITERATIONS", "200")],
    ) else {
        return;
    };
    assert!(stdout.contains("runs failed: 0"), "{stdout}");
    let raw = written(&out, "threads-raw.txt");
    // 2 rounds x 2 thread counts x (4 modes + 5 plain runs) x 5 operations.
    assert_eq!(raw.lines().count(), 2 * 2 * 9 * 5, "{raw}");
    for (r, t) in [(1, 1), (1, 3), (2, 1), (2, 3)] {
        let modes: Vec<&str> = raw
            .lines()
            .filter(|l| {
                l.starts_with(&format!("round {r} "))
                    && l.contains(&format!(" threads {t} "))
                    && l.contains(" op launch ")
            })
            .map(|l| l.split_whitespace().nth(5).unwrap())
            .collect();
        // plain before the first mode and after every one.
        assert_eq!(modes.len(), 9, "{raw}");
        assert!(modes.iter().step_by(2).all(|m| *m == "plain"), "{modes:?}");
        let mut others: Vec<&str> = modes.iter().skip(1).step_by(2).copied().collect();
        others.sort_unstable();
        assert_eq!(others, ["aa", "fix", "observe", "off"]);
    }
    let table = written(&out, "threads-table.md");
    for op in [
        "pinned_copy",
        "pageable_copy",
        "launch",
        "alloc_free",
        "event_wait",
    ] {
        for t in [1, 3] {
            assert!(table.contains(&format!("| {op} | {t} | ")), "{table}");
        }
    }
    assert!(
        table.contains("| A/A (plain) | off | observe | fix |"),
        "{table}"
    );
    assert!(table.contains("n=2: under 95 %"), "{table}");
}

/// A run that ROUNDS ends with most of BUDGET_S left says so on its `rounds:` line (the
/// line scripts/bench/gpu-threads-interleaved.sh passes on); a run the budget ends does not.
#[test]
fn the_benchmark_says_when_rounds_and_not_the_budget_ended_it() {
    let run = |budget: &str| {
        run_on_fake_driver(
            "scripts/bench/gpu-threads.sh",
            &[
                ("ROUNDS", "1"),
                ("THREADS", "1"),
                ("ITERATIONS", "50"),
                ("MODES", "fix"),
                ("OPS", "launch"),
                ("BUDGET_S", budget),
            ],
        )
    };
    let Some((_, filled)) = run("0") else {
        return;
    };
    let line = |stdout: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with("rounds: 1 of 1 in "))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no rounds line: {stdout}"))
    };
    assert!(!line(&filled).contains("unused"), "{filled}");
    let (_, short) = run("100000").unwrap();
    let said = line(&short);
    assert!(
        said.contains("; ROUNDS=1 ended the run with ")
            && said.ends_with(" s of BUDGET_S=100000 unused (set ROUNDS higher to use it)"),
        "{said}"
    );
}

#[test]
fn host_cost_benchmark_runs_against_the_null_driver_and_reports_added_nanoseconds() {
    let Some((out, _)) = run_script(
        "scripts/bench/host-threads.sh",
        HOST_THREADS_NOT_EMULATED,
        &[
            ("ROUNDS", "1"),
            ("THREADS", "1 2"),
            ("ITERATIONS", "2000"),
            ("MODES", "aa observe"),
        ],
    ) else {
        return;
    };
    let raw = written(&out, "threads-raw.txt");
    // 1 round x 2 thread counts x (2 modes + 3 plain runs) x 5 operations.
    assert_eq!(raw.lines().count(), 2 * 5 * 5, "{raw}");
    let table = written(&out, "host-table.md");
    assert!(table.starts_with("cores: "), "{table}");
    assert!(
        table.contains("### ns added per operation, paired with plain: CPU time"),
        "{table}"
    );
    // Every operation at both thread counts; the flatness table for the thread counts run
    // (its rows need a cost above 0 at one thread, which a run this short need not show;
    // A/A is the control and gets none).
    for op in [
        "pinned_copy",
        "pageable_copy",
        "launch",
        "alloc_free",
        "event_wait",
    ] {
        for t in [1, 2] {
            assert!(table.contains(&format!("| {op} | {t} | ")), "{table}");
        }
        assert!(!table.contains(&format!("| {op} | aa |")), "{table}");
    }
    assert!(
        table.contains("### CPU ns added at T threads over that at 1 thread")
            && table.contains("| operation | mode | 1 | 2 |"),
        "{table}"
    );
    assert!(table.contains("n=1: under 95 %"), "{table}");
}

#[test]
fn the_benchmark_runs_only_the_operations_asked_for_with_their_iterations_on_the_cores_given() {
    let Some((out, _)) = run_script(
        "scripts/bench/host-threads.sh",
        HOST_THREADS_NOT_EMULATED,
        &[
            ("ROUNDS", "1"),
            ("THREADS", "2"),
            ("ITERATIONS", "3000"),
            ("MODES", "fix"),
            ("OPS", "event_wait,alloc_free"),
            ("ALLOC_EVERY", "10"),
            ("CPUS", "0"),
        ],
    ) else {
        return;
    };
    let raw = written(&out, "threads-raw.txt");
    // 1 round x 1 thread count x (1 mode + 2 plain runs) x 2 operations.
    assert_eq!(raw.lines().count(), 3 * 2, "{raw}");
    let iterations = |op: &str| -> Vec<&str> {
        raw.lines()
            .filter(|l| l.contains(&format!(" op {op} ")))
            .map(|l| l.rsplit(' ').next().unwrap())
            .collect()
    };
    assert_eq!(iterations("event_wait"), ["3000"; 3], "{raw}");
    assert_eq!(iterations("alloc_free"), ["300"; 3], "{raw}");
    let log = written(&out, "gpu-threads-log.txt");
    // Without taskset (util-linux) the script warns and runs unpinned.
    let taskset = Command::new("taskset").arg("-V").output().is_ok();
    let cpus = if taskset {
        "cpus: taskset -c 0"
    } else {
        "cpus: all"
    };
    assert!(
        log.contains(&format!(
            "ops: event_wait,alloc_free; alloc every: 10; interleave: no; plain between modes: yes; {cpus}"
        )),
        "{log}"
    );
    assert_eq!(log.contains("warning: CPUS=0"), !taskset, "{log}");
}

/// The processes of one round and thread count of an interleaved run's raw file, as
/// (pos, mode) in order (each process prints PAIRS lines per operation).
fn interleaved_schedule(raw: &str, round: u32, threads: u32) -> Vec<(u32, String)> {
    let mut seen: Vec<(u32, String)> = raw
        .lines()
        .filter(|l| l.starts_with(&format!("round {round} ")))
        .filter(|l| l.contains(&format!(" threads {threads} ")))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[3].parse().unwrap(), f[5].to_string())
        })
        .collect();
    seen.sort();
    seen.dedup();
    seen
}

#[test]
fn the_interleaved_schedule_runs_one_plain_process_per_round_when_asked() {
    let run = |between: &str| {
        run_on_fake_driver(
            "scripts/bench/gpu-threads.sh",
            &[
                ("ROUNDS", "2"),
                ("THREADS", "2"),
                ("ITERATIONS", "100"),
                ("MODES", "observe fix"),
                ("OPS", "launch"),
                ("INTERLEAVE", "20"),
                ("PAIRS", "2"),
                ("PLAIN_BETWEEN", between),
            ],
        )
    };
    let Some((out, stdout)) = run("no") else {
        return;
    };
    assert!(stdout.contains("runs failed: 0"), "{stdout}");
    let raw = written(&out, "threads-raw.txt");
    // 2 rounds x 3 processes (plain, then the two modes) x 2 pairs of one operation.
    assert_eq!(raw.lines().count(), 2 * 3 * 2, "{raw}");
    for r in [1, 2] {
        let s = interleaved_schedule(&raw, r, 2);
        assert_eq!(s.len(), 3, "{raw}");
        assert_eq!(s[0], (0, "plain".to_string()), "{raw}");
        let mut modes: Vec<(u32, &str)> = s[1..].iter().map(|(p, m)| (*p, m.as_str())).collect();
        modes.sort_by_key(|&(_, m)| m);
        assert_eq!(
            modes.iter().map(|&(_, m)| m).collect::<Vec<_>>(),
            ["fix", "observe"]
        );
        let mut pos: Vec<u32> = modes.iter().map(|&(p, _)| p).collect();
        pos.sort_unstable();
        assert_eq!(pos, [1, 2], "{raw}");
    }
    let table = written(&out, "threads-table.md");
    assert!(
        table.contains("| operation | threads | plain (in-process A/A) | observe | fix |"),
        "{table}"
    );
    // A value that is neither yes nor no is said, and the plain runs stay between.
    let Some((out, stdout)) = run("sometimes") else {
        return;
    };
    assert!(
        stdout.contains(
            "warning: PLAIN_BETWEEN=sometimes: not yes or no; plain runs stay between the modes"
        ),
        "{stdout}"
    );
    let raw = written(&out, "threads-raw.txt");
    for r in [1, 2] {
        let s = interleaved_schedule(&raw, r, 2);
        let modes: Vec<&str> = s.iter().map(|(_, m)| m.as_str()).collect();
        assert_eq!(modes.len(), 5, "{raw}");
        assert!(modes.iter().step_by(2).all(|m| *m == "plain"), "{modes:?}");
    }
}

#[test]
fn the_thread_table_keeps_every_thread_counts_raw_lines_in_one_file() {
    let Some((out, stdout)) = run_on_fake_driver(
        "scripts/bench/gpu-threads-interleaved.sh",
        &[
            ("ROWS", "1 20 5 50\n2 20 5 50"),
            ("ROUNDS", "1"),
            ("MODES", "fix"),
            ("OPS", "launch"),
            ("PAIRS", "2"),
            ("PLAIN_BETWEEN", "no"),
        ],
    ) else {
        return;
    };
    let raw = written(&out, "raw.txt");
    // Per thread count: 2 processes (plain, fix) x 2 pairs of one operation, in the order
    // of the rows.
    let each = [
        written(&out, "t1/threads-raw.txt"),
        written(&out, "t2/threads-raw.txt"),
    ];
    assert_eq!(raw, each.concat(), "{raw}");
    assert_eq!(raw.lines().count(), 2 * 2 * 2, "{raw}");
    let table = written(&out, "table.md");
    for t in [1, 2] {
        assert!(table.contains(&format!("| launch | {t} | ")), "{table}");
    }
    assert!(table.contains("processes per cell: 1-1"), "{table}");
    assert!(stdout.contains(&table), "{stdout}");
}

#[test]
fn the_interleaved_benchmark_compares_the_shims_wrappers_with_the_drivers_own_definitions() {
    let Some((out, _)) = run_script(
        "scripts/bench/host-threads.sh",
        HOST_THREADS_NOT_EMULATED,
        &[
            ("ROUNDS", "1"),
            ("THREADS", "2"),
            ("ITERATIONS", "200"),
            ("MODES", "fix"),
            ("OPS", "pinned_copy"),
            ("INTERLEAVE", "2000"),
            ("PAIRS", "3"),
        ],
    ) else {
        return;
    };
    let raw = written(&out, "threads-raw.txt");
    // 3 processes (plain, fix, plain) x 3 pairs, and no per-run lines.
    assert_eq!(raw.lines().count(), 9, "{raw}");
    assert!(
        raw.lines()
            .all(|l| l.contains(" pairop pinned_copy threads 2 index ")),
        "{raw}"
    );
    let table = written(&out, "host-table.md");
    assert!(
        table.contains("| operation | threads | plain (in-process A/A) | fix |"),
        "{table}"
    );
    // The null driver's copy costs a few ns, the shim's race check on a pinned copy about a
    // hundred: through its wrappers the copy takes many times the CPU time it takes through
    // the driver's own definitions, which the shim never sees. CPU time, not wall time: a
    // block's wall time on a loaded machine is whatever the scheduler made it.
    let cpu = table
        .split("### In-process ratio, shim's wrappers / driver's own definitions: CPU time")
        .nth(1)
        .unwrap_or_else(|| panic!("{table}"));
    let row = cpu
        .lines()
        .find(|l| l.starts_with("| pinned_copy | 2 | "))
        .unwrap_or_else(|| panic!("{table}"));
    let fix = row.split(" | ").nth(3).unwrap();
    let ratio: f64 = fix.split('x').next().unwrap().parse().unwrap();
    assert!(ratio > 2.0 && fix.contains("over"), "{row}");
}

/// scripts/bench/gpu-alloc-parts.sh against the fake driver, one round of two pairs per process
/// with blocks of 50, and `settings` beside: its output directory, once it reported no
/// failed run (`None` where it cannot run, as [`run_script`]).
fn alloc_parts(settings: &[(&str, &str)]) -> Option<tempfile::TempDir> {
    let fake = artifacts().fake_dir.to_string_lossy().into_owned();
    let mut all = vec![
        ("FAKE_DRIVER_DIR", fake.as_str()),
        ("ROUNDS", "1"),
        ("INTERLEAVE", "50"),
        ("PAIRS", "2"),
    ];
    all.extend_from_slice(settings);
    let (out, stdout) = run_script(
        "scripts/bench/gpu-alloc-parts.sh",
        "scripts/bench/gpu-alloc-parts.sh builds its program with the host's cc, which cannot link \
         the fake driver built for the emulated target",
        &all,
    )?;
    assert!(stdout.contains("runs failed: 0"), "{stdout}");
    Some(out)
}

#[test]
fn the_alloc_parts_benchmark_runs_each_variant_of_the_shim_in_the_interleaved_mode() {
    let Some(out) = alloc_parts(&[("THREADS", "2")]) else {
        return;
    };
    let raw = written(&out, "raw.txt");
    // 1 round x 1 thread count x 6 variants x 2 pairs, alloc + free only.
    assert_eq!(raw.lines().count(), 12, "{raw}");
    assert!(
        raw.lines()
            .all(|l| l.contains(" pairop alloc_free threads 2 ")),
        "{raw}"
    );
    let table = written(&out, "table.md");
    assert!(
        table.contains(
            "| operation | threads | plain (in-process A/A) | off | observe | fix | \
             observe,lifetime=off | observe,validate=off |"
        ),
        "{table}"
    );
}

/// BEFORE adds an earlier build's observe and fix variants, VARIANTS picks the variants run
/// and BLOCKS sets a thread count's block length.
#[test]
fn the_alloc_parts_benchmark_compares_an_earlier_build_on_the_variants_asked_for() {
    let before = artifacts().shim.to_string_lossy().into_owned();
    let Some(out) = alloc_parts(&[
        ("THREADS", "1 2"),
        ("BLOCKS", "1:20"),
        ("BEFORE", &before),
        ("VARIANTS", "plain fix fix,before"),
    ]) else {
        return;
    };
    let raw = written(&out, "raw.txt");
    // 1 round x 2 thread counts x 3 variants x 2 pairs.
    assert_eq!(raw.lines().count(), 12, "{raw}");
    assert_eq!(raw.matches(" mode fix,before ").count(), 4, "{raw}");
    let table = written(&out, "table.md");
    assert!(
        table.contains("| operation | threads | plain (in-process A/A) | fix | fix,before |"),
        "{table}"
    );
}

/// GAPS adds a "plain,gap=K" variant per K: no preload, and threads_bench.c's GAP_SPIN
/// makes its linked blocks spin after each driver call, which shows as CPU time the linked
/// block has and the direct one has not, in every pair. A GAP_SPIN that is not a number of
/// iterations is refused with exit status 2.
#[test]
fn the_alloc_parts_benchmark_measures_a_gap_between_driver_calls_without_the_shim() {
    let Some(out) = alloc_parts(&[
        ("THREADS", "1"),
        ("VARIANTS", "plain plain,gap=20000"),
        ("GAPS", "20000"),
    ]) else {
        return;
    };
    let raw = written(&out, "raw.txt");
    // 1 round x 1 thread count x 2 variants x 2 pairs.
    assert_eq!(raw.lines().count(), 4, "{raw}");
    let field = |l: &str, name: &str| -> f64 {
        let w: Vec<&str> = l.split_whitespace().collect();
        let i = w.iter().position(|x| *x == name).unwrap();
        w[i + 1].parse().unwrap()
    };
    let gap: Vec<&str> = raw
        .lines()
        .filter(|l| l.contains(" mode plain,gap=20000 "))
        .collect();
    assert_eq!(gap.len(), 2, "{raw}");
    for l in gap {
        // 20,000 iterations of a volatile loop take microseconds per call; the fake driver's
        // alloc + free pair takes well under one.
        assert!(field(l, "lc") > field(l, "dc") + 1000.0, "{l}");
    }
    let table = written(&out, "table.md");
    assert!(
        table.contains("| operation | threads | plain (in-process A/A) | plain,gap=20000 |"),
        "{table}"
    );
}

/// scripts/bench/gpu-held-counts.sh against the fake driver: the exit summary counts every
/// cuMemAlloc_v2 and cuMemFree_v2 of four threads that exit (counted on their held-allocation
/// lines), exactly, and the same with BEFORE's build.
#[test]
fn the_held_counts_check_finds_every_allocation_and_free_of_exited_threads() {
    let a = artifacts();
    let fake = a.fake_dir.to_string_lossy().into_owned();
    let before = a.shim.to_string_lossy().into_owned();
    let Some((_out, stdout)) = run_script(
        "scripts/bench/gpu-held-counts.sh",
        "scripts/bench/gpu-held-counts.sh builds its program with the host's cc, which cannot link \
         the fake driver built for the emulated target",
        &[("FAKE_DRIVER_DIR", &fake), ("BEFORE", &before)],
    ) else {
        return;
    };
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("threads_bench "))
        .collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    for l in lines {
        assert!(
            l.ends_with(": cuMemAlloc_v2 2044/0 cuMemFree_v2 2044/0"),
            "{stdout}"
        );
    }
    assert!(stdout.contains("failed: 0"), "{stdout}");
}

/// threads_bench.c's LINKED=dlsym takes the "linked" block's functions from the program's
/// dlsym, which the preloaded shim answers with its wrappers (its `dladdr` line names the
/// shim); any other value of LINKED is refused with exit status 2.
#[test]
fn the_interleaved_benchmark_reaches_the_driver_through_dlsym_when_asked() {
    if seedance_e2e::target::skip_under_emulation(
        "threads_bench.c is built with the host's cc, which cannot link the fake driver built \
         for the emulated target",
    ) {
        return;
    }
    let a = artifacts();
    let dir = tempfile::tempdir().unwrap();
    let tb = dir.path().join("tb");
    // The scripts' own build of it (scripts/gpu/lib/common.sh, build_threads_bench).
    let built = Command::new("bash")
        .args([
            "-c",
            "here=scripts; . scripts/gpu/lib/common.sh; build_threads_bench \"$1\"",
            "build",
        ])
        .arg(&tb)
        .current_dir(root())
        .env("FAKE_DRIVER_DIR", &a.fake_dir)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let run = |linked: &str| {
        Command::new(&tb)
            .args(["1", "100"])
            .env("LD_LIBRARY_PATH", &a.fake_dir)
            .env("LD_PRELOAD", &a.shim)
            .env("INTERLEAVE", "10")
            .env("PAIRS", "1")
            .env("OPS", "launch")
            .env("LINKED", linked)
            .output()
            .unwrap()
    };
    let o = run("dlsym");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("interleave: linked "))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        line.starts_with(&format!("interleave: linked {},", a.shim.display())),
        "{line}"
    );
    let o = Command::new(&tb)
        .args(["1", "100"])
        .env("LD_LIBRARY_PATH", &a.fake_dir)
        .env("GAP_SPIN", "some")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim(),
        "GAP_SPIN=some: not a number of iterations"
    );
    let o = run("symbols");
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim(),
        "LINKED=symbols: only dlsym (or unset: the linked symbols)"
    );
}

/// scripts/bench/gpu-threads-perf.sh runs the interleaved mode with hardware counters against the
/// fake driver: a table of events where perf_event_open works, one line where it does not
/// (containers refuse it), and its table's parser passes its selftest either way.
#[test]
fn the_hardware_event_benchmark_runs_and_says_what_it_counted() {
    let a = artifacts();
    let fake = a.fake_dir.to_string_lossy().into_owned();
    let Some((out, stdout)) = run_script(
        "scripts/bench/gpu-threads-perf.sh",
        "scripts/bench/gpu-threads-perf.sh builds its program with the host's cc, which cannot link \
         the fake driver built for the emulated target",
        &[
            ("FAKE_DRIVER_DIR", &fake),
            ("ROUNDS", "1"),
            ("ROWS", "1 50 5 launch,alloc_free"),
            ("MODES", "plain observe"),
            ("PAIRS", "2"),
        ],
    ) else {
        return;
    };
    assert!(stdout.contains("runs failed: 0"), "{stdout}");
    let table = written(&out, "perf-table.md");
    let raw = written(&out, "perf-raw.txt");
    if raw.is_empty() {
        assert_eq!(
            table.trim(),
            "no hardware events were counted on this machine (perf_event_open refused)"
        );
    } else {
        // Two modes x two operations, each with the events this machine counts.
        for row in ["| launch | 1 | observe | ", "| alloc_free | 1 | plain | "] {
            assert!(table.contains(row), "{table}");
        }
    }
    let o = Command::new("python3")
        .arg(root().join("scripts/gpu/perf_table.py"))
        .arg("--selftest")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn the_cold_cache_benchmark_counts_the_lines_the_shim_misses_per_call() {
    let Some(_) = optional_tool(
        "bench_scripts::the_cold_cache_benchmark_counts_the_lines_the_shim_misses_per_call",
        &["valgrind"],
        "SEEDANCE_REQUIRE_VALGRIND",
    ) else {
        return;
    };
    let Some((_, stdout)) = run_script(
        "scripts/bench/cachegrind-evicted.sh",
        "scripts/bench/cachegrind-evicted.sh builds the null driver with the host's cc, which cannot \
         load the shim built for the emulated target",
        &[("KINDS", "pinned")],
    ) else {
        return;
    };
    // "pinned plain|shim D1r LLr D1w LLw": the loop's own 8 MiB is 131072 line misses per
    // call either way; the shim's race check on a pinned copy adds dozens more.
    let ll_read = |run: &str| -> f64 {
        let line = stdout
            .lines()
            .find(|l| l.starts_with("pinned") && l.split_whitespace().nth(1) == Some(run))
            .unwrap_or_else(|| panic!("{stdout}"));
        line.split_whitespace().nth(3).unwrap().parse().unwrap()
    };
    let (plain, shim) = (ll_read("plain"), ll_read("shim"));
    assert!((131072.0..131100.0).contains(&plain), "{stdout}");
    assert!(shim - plain > 10.0, "{stdout}");
}

#[test]
fn the_line_count_names_the_lines_an_allocation_and_its_free_touch() {
    let Some(_) = optional_tool(
        "bench_scripts::the_line_count_names_the_lines_an_allocation_and_its_free_touch",
        &["valgrind"],
        "SEEDANCE_REQUIRE_VALGRIND",
    ) else {
        return;
    };
    // Checked before the release build is made (run_script_on checks it again).
    const NOT_EMULATED: &str = "scripts/bench/lines-touched.sh measures the host's release build \
         of the shim, which the emulated target's run does not test";
    if seedance_e2e::target::skip_under_emulation(NOT_EMULATED) {
        return;
    }
    let Some((_, stdout)) = run_script_on(
        seedance_e2e::release_shim(),
        "scripts/bench/lines-touched.sh",
        NOT_EMULATED,
        &[("KINDS", "alloc"), ("MODES", "off fix"), ("N", "100")],
    ) else {
        return;
    };
    // One section per mode: "## alloc, MODE", then "instructions X", "shim code lines N",
    // "other code lines N", "data lines N" with one line each, "stack lines N".
    let section = |mode: &str| -> &str {
        let head = format!("## alloc, {mode}\n");
        let start = stdout.find(&head).unwrap_or_else(|| panic!("{stdout}")) + head.len();
        let rest = &stdout[start..];
        &rest[..rest.find("## ").unwrap_or(rest.len())]
    };
    let number = |text: &str, key: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("{key}: {text}"));
        line[key.len()..].trim().parse().unwrap()
    };
    let (off, fix) = (section("off"), section("fix"));
    // `off` forwards: a few dozen instructions, the configuration word's line and the
    // real-function slots' line, nothing of the thread's.
    assert!(number(off, "instructions") > 20.0, "{off}");
    assert!(
        number(fix, "instructions") > number(off, "instructions"),
        "{stdout}"
    );
    assert!(number(off, "data lines") >= 1.0, "{off}");
    assert!(
        number(fix, "data lines") > number(off, "data lines"),
        "{stdout}"
    );
    // The held allocation is reached by the thread pointer, not through a thread-local
    // (seedance_hotpath::held_lines): the switches' line, the thread control block's first
    // line (read for the thread pointer) and the held line, in the shim's own zeroed data,
    // and no thread state. The stack walk that names the library holding each new
    // allocation (docs/design.md "Who holds the memory") adds the lines of its return-address
    // cache: 9 or 10 in all, measured 2026-12-07, as the addresses fall (3 before the walk).
    let data = number(fix, "data lines");
    assert!((4.0..=12.0).contains(&data), "{fix}");
    // Other objects' code: only that walk's (libgcc_s's unwinder, the C library's and the
    // loader's lookup of each frame's object).
    let other: Vec<&str> = fix
        .lines()
        .skip_while(|l| !l.starts_with("other code lines"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert_eq!(other.len() as f64, number(fix, "other code lines"), "{fix}");
    assert!(
        other.iter().all(|l| [
            "  libgcc_s.so.1 +",
            "  libc.so.6 +",
            "  loader or program +"
        ]
        .iter()
        .any(|p| l.starts_with(p))),
        "{fix}"
    );
    assert!(
        fix.lines()
            .any(|l| l.starts_with("  heap or TLS: ") && l.contains("thread_pointer")),
        "{fix}"
    );
    assert!(
        fix.lines()
            .any(|l| l.starts_with("  libseedance_fix.so +") && l.contains("atomic_store")),
        "{fix}"
    );
    let o = Command::new("python3")
        .arg(root().join("scripts/bench/lines_touched.py"))
        .arg("--selftest")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
