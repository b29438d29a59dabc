//! Unit tests of the aggregates.

use super::*;

#[test]
fn examples_keep_smallest_regardless_of_order() {
    let items = ["f", "a", "e", "b", "d", "c", "a", "g", "c"];
    let mut fwd = Examples::default();
    for s in items {
        fwd.add(s, 1);
    }
    let mut split_a = Examples::default();
    let mut split_b = Examples::default();
    for (i, s) in items.iter().rev().enumerate() {
        if i % 2 == 0 {
            split_a.add(s, 1)
        } else {
            split_b.add(s, 1)
        }
    }
    split_b.merge(&split_a);
    assert_eq!(fwd, split_b);
    assert_eq!(
        fwd.0,
        vec![
            ("a".into(), 2),
            ("b".into(), 1),
            ("c".into(), 2),
            ("d".into(), 1),
            ("e".into(), 1)
        ]
    );
}

#[test]
fn examples_are_the_smallest_with_exact_counts() {
    let mut rng: u64 = 88172645463325252;
    let mut ex = Examples::default();
    let mut all: BTreeMap<String, u64> = BTreeMap::new();
    for _ in 0..5000 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let s = format!("{{\"n\":{}}}", rng % 60);
        ex.add(&s, 1);
        *all.entry(s).or_default() += 1;
    }
    let want: Vec<(String, u64)> = all.into_iter().take(MAX_EXAMPLES).collect();
    assert_eq!(ex.0, want);
}

#[test]
fn timeline_coarsens_and_merges_order_independently() {
    let mut one = Timeline::default();
    let mut a = Timeline::default();
    let mut b = Timeline::default();
    for s in 0..2000u64 {
        let ts = s * 1_000_000_000 + 5;
        one.add(ts, "X", 1);
        if s % 3 == 0 {
            a.add(ts, "X", 1)
        } else {
            b.add(ts, "X", 1)
        }
    }
    b.merge(a);
    assert_eq!(one, b);
    assert!(one.buckets.len() <= MAX_BUCKETS);
    // 2000 s over at most 512 buckets: 1 ms * 2^12.
    assert_eq!(one.width_ns, 4_096_000_000);
    assert_eq!(one.buckets.values().map(|m| m["X"]).sum::<u64>(), 2000);
}

#[test]
fn kinds_are_capped() {
    let mut c = Counters::default();
    for i in 0..MAX_KINDS + 10 {
        c.note_kind(&format!("k{i}"), true);
    }
    assert_eq!(c.unknown_event_kinds.len(), MAX_KINDS + 1);
    assert_eq!(c.unknown_event_kinds[OTHER_KINDS], 10);
}

/// `call_failed` records held per file and added at the end of the file give what
/// adding each record at once gives: counts, first codes, examples, errors over time
/// and the records-by-kind counters (with the kinds' cap).
#[test]
fn held_call_failed_records_add_up_like_single_ones() {
    use crate::read::parse::parse_line;
    let mut rng: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |n: u64| {
        rng ^= rng >> 12;
        rng ^= rng << 25;
        rng ^= rng >> 27;
        rng.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    };
    for (round, unknown_kinds) in [(0, 0), (1, 3), (2, MAX_KINDS + 5)].into_iter() {
        let mut lines = Vec::new();
        for k in 0..unknown_kinds {
            lines.push(format!(
                r#"{{"v":1,"seq":0,"ts_ns":1,"pid":9,"event":"later_{k}"}}"#
            ));
        }
        for seq in 0..5000u64 {
            let pid = 1 + next(3);
            let ts = 1_000_000_000_000 + next(900) * 1_000_000_000 + next(1_000_000_000);
            let function = ["cuA", "cuB", "cuMemAlloc_v2"][next(3) as usize];
            let (result, name) = [
                (2, Some("CUDA_ERROR_OUT_OF_MEMORY")),
                (3, Some("CUDA_ERROR_OUT_OF_MEMORY")),
                (101, None),
                (101, Some("101")),
            ][next(4) as usize];
            let name = name
                .map(|n| format!(r#","result_name":"{n}""#))
                .unwrap_or_default();
            let args = match next(3) {
                0 => String::new(),
                _ => format!(r#","args":{{"n":{}}}"#, next(40)),
            };
            lines.push(format!(
                r#"{{"v":1,"seq":{seq},"ts_ns":{ts},"pid":{pid},"event":"call_failed","function":"{function}","result":{result}{name}{args}}}"#
            ));
            if next(500) == 0 {
                lines.push(format!(
                    r#"{{"v":1,"seq":{seq},"ts_ns":{ts},"pid":{pid},"event":"later_x"}}"#
                ));
            }
        }
        let mut agg = Aggregate::default();
        let mut file = agg.begin_file("f");
        for l in &lines {
            agg.record(&mut file, parse_line(l.as_bytes()));
        }
        agg.end_file(file);

        // One record at a time, as before.
        let mut counters = Counters::default();
        let mut timeline = Timeline::default();
        let mut failed: BTreeMap<u32, HashMap<String, HashMap<String, Failures>>> = BTreeMap::new();
        for l in &lines {
            match parse_line(l.as_bytes()) {
                Line::CallFailed(h, c) => {
                    counters.note_kind("call_failed", false);
                    let key = c
                        .result_name
                        .as_deref()
                        .map(str::to_string)
                        .unwrap_or_else(|| c.result.to_string());
                    let f = failed
                        .entry(h.pid)
                        .or_default()
                        .entry(c.function.to_string())
                        .or_default()
                        .entry(key.clone())
                        .or_insert_with(|| Failures {
                            code: c.result,
                            ..Failures::default()
                        });
                    f.count += 1;
                    if let Some(a) = c.args {
                        f.examples.add(a.get(), 1);
                    }
                    timeline.add(h.ts_ns, &key, 1);
                }
                Line::Unknown(_, kind) => counters.note_kind(&kind, true),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(
            agg.counters.records_by_kind, counters.records_by_kind,
            "{round}"
        );
        assert_eq!(agg.timeline, timeline, "{round}");
        for p in &agg.processes {
            if p.pid != 9 {
                assert_eq!(p.failed, failed[&p.pid], "{round} {}", p.pid);
            }
        }
    }
}
