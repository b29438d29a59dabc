//! Property tests of the line parser and the reader (a short fuzzing run in every
//! `cargo test`): random bytes and text, and structured near-valid records: a real record of
//! every known kind with fields removed, added, given values of other types (at the top level
//! or one level down), the event kind changed, and the line cut, spliced with random bytes
//! or given out-of-range numbers. Besides "never panics", the parser must keep the leniency
//! contract of `docs/analyzer.md`: a known kind missing only optional fields still reads as
//! that kind, one missing a required field is malformed, one without its envelope is not a
//! record; and whole files of such lines must give a consistent report in every format.
//!
//! The line-parser properties run [`LINE_CASES`] cases each (about a second in a debug
//! build); `PROPTEST_CASES` does not change them.

use proptest::prelude::*;
use proptest::sample::Index;
use seedance_analyze::read::input::{parse_line, read_file, read_line_bounded, Line, Options};
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::io::BufReader;

/// Cases of each line-parser property.
const LINE_CASES: u32 = 2000;
/// Cases of each whole-file property (each writes a file and renders three formats).
const FILE_CASES: u32 = 300;

/// One real record of every known kind (as the shim writes them: schema 3, from
/// `tests/e2e/launch.rs`, `tests/e2e/alloc.rs` and the fixtures), with the fields that the
/// analyzer requires beyond the envelope.
const TEMPLATES: &[(&str, &[&str], &str)] = &[
    (
        "session_start",
        &[],
        r#"{"v":3,"seq":0,"ts_ns":1796014410096938514,"pid":27228,"tid":27229,"event":"session_start","shim_version":"0.1.0","mode":"fix","executable":"/tmp/sdr/bin/alloc_faults","argv":["bin/alloc_faults","oom"],"hostname":"vm","driver_version":13000,"libcuda_path":"/tmp/sdr/driver/libcuda.so.1","cuda_visible_devices":null,"cuda_device_order":null,"devices":[{"ordinal":0,"name":"Fake H200 #0","pci_bus_id":"0000:10:00.0","total_mem_bytes":85899345920}],"topology":{"devices":[{"ordinal":0,"name":"Fake H200 #0","pci_bus_id":"0000:10:00.0","uuid":"GPU-face5eed-0000-4000-8000-000000000000","nvml_index":0,"physical_index":0,"total_mem_bytes":85899345920,"free_mem_bytes":1073741824,"compute_mode":"default","busy_processes":0}],"visibility":{"cuda_visible_devices":null,"physical_count":2,"ordinals":[{"ordinal":0,"physical_index":0,"entry":null}],"stopped_at":null},"device_order":"FASTEST_FIRST","order_warning":null,"nvml":{"present":true,"reason":null}}}"#,
    ),
    (
        "call_failed",
        &["function", "result"],
        r#"{"v":3,"seq":2,"ts_ns":1764470552000000000,"pid":27228,"tid":27228,"event":"call_failed","function":"cuMemAlloc_v2","result":2,"result_name":"CUDA_ERROR_OUT_OF_MEMORY","args":{"bytesize":85899345920}}"#,
    ),
    (
        "exit_summary",
        &[],
        r#"{"v":3,"seq":3,"ts_ns":1796014410097516011,"pid":27228,"tid":27228,"event":"exit_summary","duration_ns":8959704,"functions":{"cuMemAlloc_v2":{"calls":4,"errors":1,"errors_by_result":{"CUDA_ERROR_OUT_OF_MEMORY":1}},"cuLaunchKernel":{"calls":4,"errors":3,"errors_by_result":{"CUDA_ERROR_INVALID_VALUE":3}}},"dropped_records":0,"procaddr_unmatched":[],"repairs":{"device_fallback":1},"fallbacks":{"1":0}}"#,
    ),
    (
        "device_fault",
        &["requested_ordinal", "fault"],
        r#"{"v":3,"seq":4,"ts_ns":1796012369120650407,"pid":27228,"tid":27228,"event":"device_fault","function":"cuDeviceGet","requested_ordinal":1,"result":101,"result_name":"CUDA_ERROR_INVALID_DEVICE","fault":"invalid_ordinal","visible_devices":1,"explanation":"ordinal 1 requested, 1 device visible"}"#,
    ),
    (
        "device_fallback",
        &["requested_ordinal", "chosen_ordinal"],
        r#"{"v":3,"seq":5,"ts_ns":1796012369120659563,"pid":27228,"tid":27228,"event":"device_fallback","function":"cuDeviceGet","requested_ordinal":1,"chosen_ordinal":0,"chosen_pci_bus_id":"0000:11:00.0","reason":"ordinal 1 is not visible","result":0,"explanation":"fix: ordinal 1 -> ordinal 0"}"#,
    ),
    (
        "launch_fault",
        &["function", "result", "check"],
        r#"{"v":3,"seq":6,"ts_ns":1796014409932391475,"pid":27228,"tid":27228,"event":"launch_fault","function":"cuLaunchKernel","result":1,"result_name":"CUDA_ERROR_INVALID_VALUE","check":"threads_per_block","limit":1024,"requested":1056,"device":0,"grid":[1,1,1],"block":[32,33,1],"shared_mem_bytes":0,"refused_before_driver":false,"explanation":"block (32,33,1) = 1056 threads, over device 0's limit of 1024 threads per block","driver_message":"[cuLaunchKernel] too many threads per block: 1056 > 1024"}"#,
    ),
    (
        "alloc_fault",
        &["function", "result", "check"],
        r#"{"v":3,"seq":7,"ts_ns":1796014410097310222,"pid":27228,"tid":27228,"event":"alloc_fault","function":"cuMemAlloc_v2","result":2,"result_name":"CUDA_ERROR_OUT_OF_MEMORY","check":"out_of_memory","requested_bytes":2147483648,"requested_signed":2147483648,"limit_bytes":805306368,"device":0,"free_bytes":805306368,"total_bytes":85899345920,"process_live_bytes":268435456,"process_live_allocations":1,"other_devices_with_room":[{"ordinal":1,"free_bytes":85899345920}],"refused_before_driver":false,"explanation":"the program asked for 2.0 GiB","driver_message":"[cuMemAlloc_v2] out of memory: 2147483648 bytes requested"}"#,
    ),
];

/// The envelope: without one of these (or with one of the wrong type) a line is no record.
const ENVELOPE: [&str; 6] = ["v", "seq", "ts_ns", "pid", "tid", "event"];
/// Of those, the ones that may be absent.
const OPTIONAL_ENVELOPE: [&str; 1] = ["tid"];

fn template(i: usize) -> Map<String, Value> {
    match serde_json::from_str(TEMPLATES[i].2) {
        Ok(Value::Object(m)) => m,
        other => panic!("template {i}: {other:?}"),
    }
}

/// The kind a classified line was read as: the variant's kind, `bad:<kind>` for a malformed
/// known kind, or the other classifications by name.
fn outcome(l: &Line) -> String {
    match l {
        Line::Blank => "blank".into(),
        Line::Malformed => "malformed".into(),
        Line::NotRecord => "not_record".into(),
        Line::BadRecord(_, k) => format!("bad:{k}"),
        Line::SessionStart(..) => "session_start".into(),
        Line::CallFailed(..) => "call_failed".into(),
        Line::ExitSummary(..) => "exit_summary".into(),
        Line::DeviceFault(..) => "device_fault".into(),
        Line::DeviceFallback(..) => "device_fallback".into(),
        Line::LaunchFault(..) => "launch_fault".into(),
        Line::AllocFault(..) => "alloc_fault".into(),
        Line::LifetimeFault(..) => "lifetime_fault".into(),
        Line::StrayContext(..) => "stray_context".into(),
        Line::LifetimeRepair(..) => "lifetime_repair".into(),
        Line::HostHazard(..) => "host_hazard".into(),
        Line::CallFailedRepeats(..) => "call_failed_repeats".into(),
        Line::TraceCut(..) => "trace_cut".into(),
        Line::Unknown(_, k) => format!("unknown:{k}"),
    }
}

/// JSON values of every type, including ones no field of the schema has (negative and
/// huge numbers, floats, nested containers).
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop_oneof![Just(-1i64), Just(0), Just(1), Just(i64::MIN)].prop_map(Value::from),
        (-1e30f64..1e30).prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
        prop_oneof![
            Just("CUDA_ERROR_OUT_OF_MEMORY"),
            Just("threads_per_block"),
            Just("out_of_memory"),
            Just("0x7f00"),
            Just(""),
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A change to a record's fields.
#[derive(Debug, Clone)]
enum Mutation {
    /// Remove the field at this index.
    Remove(Index),
    /// Give the field at this index another value.
    Replace(Index, Value),
    /// Give a field one level down (in an object or array value) another value.
    ReplaceNested(Index, Index, Value),
    /// Add a field the schema does not have (a later version's).
    AddUnknown(String, Value),
    /// Change the event kind.
    Event(String),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => any::<Index>().prop_map(Mutation::Remove),
        3 => (any::<Index>(), any_json()).prop_map(|(i, v)| Mutation::Replace(i, v)),
        2 => (any::<Index>(), any::<Index>(), any_json())
            .prop_map(|(i, j, v)| Mutation::ReplaceNested(i, j, v)),
        2 => ("[a-z_]{1,10}", any_json()).prop_map(|(k, v)| Mutation::AddUnknown(format!("later_{k}"), v)),
        1 => prop_oneof![
            Just("session_start".to_string()),
            Just("launch_fault".to_string()),
            Just("alloc_fault".to_string()),
            Just("device_fault".to_string()),
            "[a-z_]{0,12}",
        ]
        .prop_map(Mutation::Event),
    ]
}

/// What the mutations did, for the expected classification.
#[derive(Debug, Default)]
struct Applied {
    /// Fields removed.
    removed: BTreeSet<String>,
    /// Fields given another value (top level or below).
    retyped: BTreeSet<String>,
    /// The event kind was changed.
    event: bool,
}

fn apply(m: &mut Map<String, Value>, muts: &[Mutation]) -> Applied {
    let mut a = Applied::default();
    for mu in muts {
        let keys: Vec<String> = m.keys().cloned().collect();
        if keys.is_empty() {
            break;
        }
        match mu {
            Mutation::Remove(i) => {
                let k = i.get(&keys);
                m.remove(k);
                a.removed.insert(k.clone());
            }
            Mutation::Replace(i, v) => {
                let k = i.get(&keys);
                m.insert(k.clone(), v.clone());
                a.retyped.insert(k.clone());
            }
            Mutation::ReplaceNested(i, j, v) => {
                let k = i.get(&keys);
                let changed = match m.get_mut(k) {
                    Some(Value::Object(o)) if !o.is_empty() => {
                        let inner: Vec<String> = o.keys().cloned().collect();
                        o.insert(j.get(&inner).clone(), v.clone());
                        true
                    }
                    Some(Value::Array(x)) if !x.is_empty() => {
                        let n = j.index(x.len());
                        x[n] = v.clone();
                        true
                    }
                    _ => false,
                };
                if changed {
                    a.retyped.insert(k.clone());
                }
            }
            Mutation::AddUnknown(k, v) => {
                m.insert(k.clone(), v.clone());
            }
            Mutation::Event(e) => {
                m.insert("event".into(), Value::from(e.clone()));
                a.event = true;
            }
        }
    }
    a
}

/// A change to the text of a line.
#[derive(Debug, Clone)]
enum TextMutation {
    None,
    /// Cut the line here (a process killed while writing).
    Truncate(Index),
    /// Insert random bytes here.
    Insert(Index, Vec<u8>),
    /// Overwrite one byte.
    Flip(Index, u8),
    /// Replace the first number by an out-of-range one.
    BigNumber(&'static str),
}

fn text_mutation() -> impl Strategy<Value = TextMutation> {
    prop_oneof![
        4 => Just(TextMutation::None),
        2 => any::<Index>().prop_map(TextMutation::Truncate),
        1 => (any::<Index>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(i, b)| TextMutation::Insert(i, b)),
        1 => (any::<Index>(), any::<u8>()).prop_map(|(i, b)| TextMutation::Flip(i, b)),
        1 => prop_oneof![
            Just("1e400"),
            Just("18446744073709551616"),
            Just("-9223372036854775809"),
            Just("4294967296"),
            Just("-0"),
            Just("1.5"),
        ]
        .prop_map(TextMutation::BigNumber),
    ]
}

fn apply_text(line: &str, t: &TextMutation) -> Vec<u8> {
    let mut b = line.as_bytes().to_vec();
    match t {
        TextMutation::None => {}
        TextMutation::Truncate(i) => b.truncate(i.index(b.len())),
        TextMutation::Insert(i, bytes) => {
            let at = i.index(b.len() + 1);
            b.splice(at..at, bytes.iter().copied());
        }
        TextMutation::Flip(i, byte) => {
            let at = i.index(b.len());
            b[at] = *byte;
        }
        TextMutation::BigNumber(n) => {
            // The first number after a colon (the envelope's `v`).
            if let Some(p) = line.find(":").map(|p| p + 1) {
                let end = line[p..]
                    .find(|c: char| !c.is_ascii_digit())
                    .map_or(line.len(), |e| p + e);
                if end > p {
                    b.splice(p..end, n.bytes());
                }
            }
        }
    }
    b
}

/// A near-valid record: (template index, field mutations, text mutation).
fn near_record() -> impl Strategy<Value = (usize, Vec<Mutation>, TextMutation)> {
    (
        0..TEMPLATES.len(),
        prop::collection::vec(mutation(), 0..4),
        text_mutation(),
    )
}

fn build(t: usize, muts: &[Mutation], text: &TextMutation) -> (Vec<u8>, Applied) {
    let mut m = template(t);
    let applied = apply(&mut m, muts);
    let line = serde_json::to_string(&Value::Object(m)).unwrap();
    (apply_text(&line, text), applied)
}

fn near_record_line() -> impl Strategy<Value = Vec<u8>> {
    near_record().prop_map(|(t, muts, text)| build(t, &muts, &text).0)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: LINE_CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn parse_line_never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = parse_line(&bytes);
    }

    #[test]
    fn parse_line_never_panics_on_text(s in ".{0,300}") {
        let _ = parse_line(s.as_bytes());
    }

    /// Removing optional fields and adding unknown ones keeps a known kind readable;
    /// removing a required field makes it malformed; removing the envelope makes the line no
    /// record at all.
    #[test]
    fn known_kinds_read_leniently(
        t in 0..TEMPLATES.len(),
        removals in prop::collection::vec(any::<Index>(), 0..4),
        additions in prop::collection::vec(("[a-z_]{1,10}", any_json()), 0..3),
    ) {
        let (kind, required, _) = TEMPLATES[t];
        let mut muts: Vec<Mutation> = removals.into_iter().map(Mutation::Remove).collect();
        muts.extend(additions.into_iter().map(|(k, v)| Mutation::AddUnknown(format!("later_{k}"), v)));
        let (line, applied) = build(t, &muts, &TextMutation::None);
        let got = outcome(&parse_line(&line));
        let removed = |names: &[&str]| names.iter().any(|n| applied.removed.contains(*n));
        let envelope: Vec<&str> = ENVELOPE.iter().copied().filter(|f| !OPTIONAL_ENVELOPE.contains(f)).collect();
        let expected = if removed(&envelope) {
            "not_record".to_string()
        } else if removed(required) {
            format!("bad:{kind}")
        } else {
            kind.to_string()
        };
        prop_assert_eq!(got, expected, "{}", String::from_utf8_lossy(&line));
    }

    /// Any change to a known kind's own fields leaves it that kind or a malformed record of
    /// it: never another kind, never an unknown one, never a panic.
    #[test]
    fn mutated_fields_stay_their_kind_or_are_malformed((t, muts, text) in near_record()) {
        let (full, applied) = build(t, &muts, &TextMutation::None);
        let line = apply_text(std::str::from_utf8(&full).unwrap(), &text);
        let got = outcome(&parse_line(&line));
        let kind = TEMPLATES[t].0;
        let envelope_touched = applied.event
            || ENVELOPE.iter().any(|f| applied.removed.contains(*f) || applied.retyped.contains(*f));
        match text {
            TextMutation::None if !envelope_touched => {
                prop_assert!(
                    got == kind || got == format!("bad:{kind}"),
                    "{} -> {}", String::from_utf8_lossy(&line), got
                );
            }
            // A strict prefix of an object is never JSON.
            TextMutation::Truncate(_) if line.len() < full.len() => {
                prop_assert!(
                    got == "malformed" || got == "blank",
                    "{} -> {}", String::from_utf8_lossy(&line), got
                );
            }
            _ => {}
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn reader_splits_exactly(
        // About one byte in eight a newline.
        data in prop::collection::vec(any::<u8>(), 0..2000)
            .prop_map(|mut v| { v.iter_mut().filter(|b| **b < 32).for_each(|b| *b = b'\n'); v }),
        cap in 1usize..64,
        max in 1usize..40,
    ) {
        let mut r = BufReader::with_capacity(cap, &data[..]);
        let mut buf = Vec::new();
        let mut total = 0u64;
        let mut lines = 0usize;
        while let Some(l) = read_line_bounded(&mut r, &mut buf, max).unwrap() {
            prop_assert!(buf.len() <= max);
            total += l.len;
            lines += 1;
        }
        prop_assert_eq!(total, data.len() as u64);
        let expected = data.split(|b| *b == b'\n').count() - usize::from(data.last() == Some(&b'\n') || data.is_empty());
        prop_assert_eq!(lines, expected);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: FILE_CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Whole files of near-valid records and junk: the report is consistent and every
    /// format renders.
    #[test]
    fn whole_files_give_consistent_reports(
        lines in prop::collection::vec(
            prop_oneof![
                6 => near_record_line(),
                1 => ".{0,60}".prop_map(String::into_bytes),
                1 => prop::collection::vec(any::<u8>(), 0..60),
            ],
            0..24,
        ),
    ) {
        use seedance_analyze::report::ProblemKind;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.jsonl");
        std::fs::write(&p, lines.join(&b'\n')).unwrap();
        let agg = read_file(&p, &Options::default());
        let r = seedance_analyze::build_report(agg, &[]);
        let i = &r.input;
        prop_assert!(i.records + i.malformed_lines + i.truncated_lines + i.oversized_lines <= i.lines);
        // Every error (by result) is counted at most once by the problems that count failed
        // calls, and exactly once without device faults (whose problems count processes).
        let counted: u64 = r
            .problems
            .iter()
            .filter(|p| matches!(p.kind(), ProblemKind::CudaError | ProblemKind::LaunchFault | ProblemKind::AllocFault))
            .map(|p| p.count)
            .sum();
        let by_result: u64 = r.processes.iter().flat_map(|p| p.errors_by_result.values()).sum();
        prop_assert!(counted <= by_result, "{} > {}", counted, by_result);
        if !r.processes.iter().any(|p| !p.device_faults.is_empty()) {
            prop_assert_eq!(counted, by_result);
        }
        let keys: BTreeSet<&str> = r.problems.iter().map(|p| p.key.as_str()).collect();
        prop_assert_eq!(keys.len(), r.problems.len());
        for (n, p) in r.problems.iter().enumerate() {
            prop_assert_eq!(p.rank as usize, n + 1);
        }
        let _ = seedance_analyze::render::text::render(&r);
        let _ = seedance_analyze::render::html::render(&r);
        let json = seedance_analyze::render::json::render(&r);
        let back: seedance_analyze::Report = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(&back.problems.len(), &r.problems.len());
        prop_assert_eq!(&back.overview, &r.overview);
        let d = seedance_analyze::diff::diff(&r, &r);
        prop_assert!(d.new_errors.is_empty() && d.new_faults.is_empty() && d.fault_changes.is_empty() && d.new_problems.is_empty());
        let _ = seedance_analyze::diff::render_text(&d);
    }
}
