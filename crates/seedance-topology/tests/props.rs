//! Property tests: the parsers never panic, and `resolve` keeps the driver's stopping rule.

use proptest::prelude::*;
use seedance_topology::cvd::{self, EntryKind, PhysicalId, VisibleSpec};
use seedance_topology::explain::{parse_exclusions, selector_matches};
use seedance_topology::{describe, DriverDevice, Topology};

/// Physical devices with UUIDs from a tiny alphabet, so prefixes collide often.
fn physical() -> impl Strategy<Value = Vec<PhysicalId>> {
    prop::collection::vec("[ab]{1,3}", 0..5).prop_map(|tails| {
        tails
            .into_iter()
            .enumerate()
            .map(|(i, t)| PhysicalId {
                index: i as u32,
                uuid: format!("GPU-{t}{i}"),
                pci_bus_id: format!("0000:{:02x}:00.0", i + 1),
            })
            .collect()
    })
}

/// CUDA_VISIBLE_DEVICES-like strings: mostly plausible entries, some junk.
fn cvd_string() -> impl Strategy<Value = String> {
    let entry = prop_oneof![
        "[0-6]",
        " ?[0-9]{1,2} ?",
        "GPU-[ab]{0,3}[0-4]?",
        "MIG-[ab0-9]{1,3}",
        "-1",
        "",
        ".{0,4}",
    ];
    prop::collection::vec(entry, 0..6).prop_map(|v| v.join(","))
}

fn has_mig(spec: &VisibleSpec) -> bool {
    match spec {
        VisibleSpec::Unset => false,
        VisibleSpec::Set { entries, .. } => {
            entries.iter().any(|e| matches!(e.kind, EntryKind::Mig(_)))
        }
    }
}

fn entry_count(spec: &VisibleSpec) -> Option<usize> {
    match spec {
        VisibleSpec::Unset => None,
        VisibleSpec::Set { entries, .. } => Some(entries.len()),
    }
}

proptest! {
    #[test]
    fn any_string_never_panics(raw in any::<String>(), phys in physical(), count in 0usize..8) {
        let spec = cvd::parse(Some(&raw));
        let v = cvd::resolve(&spec, &phys);
        let _ = describe(&v);
        let w = cvd::resolve_by_count(&spec, count);
        let _ = describe(&w);
    }

    #[test]
    fn resolve_keeps_the_stopping_rule(raw in cvd_string(), phys in physical(), unset in any::<bool>()) {
        let spec = cvd::parse(if unset { None } else { Some(&raw) });
        let v = cvd::resolve(&spec, &phys);
        // Never more ordinals than entries, nor (without MIG entries) than devices.
        if let Some(n) = entry_count(&spec) {
            prop_assert!(v.ordinals.len() <= n);
        }
        if !has_mig(&spec) {
            prop_assert!(v.ordinals.len() <= phys.len());
        }
        // No physical device twice.
        let mut seen: Vec<u32> = v.ordinals.iter().filter_map(|o| o.physical_index).collect();
        let all = seen.len();
        seen.sort_unstable();
        seen.dedup();
        prop_assert_eq!(seen.len(), all);
        // Ordinals are 0, 1, ...
        for (i, o) in v.ordinals.iter().enumerate() {
            prop_assert_eq!(o.ordinal as usize, i);
        }
        if let VisibleSpec::Set { entries, .. } = &spec {
            // Each accepted entry is one ordinal, in order; a stop is right after them.
            for (o, e) in v.ordinals.iter().zip(entries) {
                prop_assert_eq!(o.entry.as_deref(), Some(e.text.as_str()));
            }
            match &v.stopped_at {
                Some(stop) => {
                    prop_assert_eq!(stop.position, v.ordinals.len() + 1);
                    prop_assert_eq!(&stop.entry, &entries[v.ordinals.len()].text);
                }
                None => prop_assert_eq!(v.ordinals.len(), entries.len()),
            }
            // Prefix consistency: the first k entries alone give the first ordinals.
            for k in 0..=entries.len() {
                let prefix = VisibleSpec::Set { raw: String::new(), entries: entries[..k].to_vec() };
                let pv = cvd::resolve(&prefix, &phys);
                let expect = v.ordinals.len().min(k);
                prop_assert_eq!(&pv.ordinals[..], &v.ordinals[..expect]);
            }
        } else {
            prop_assert_eq!(v.ordinals.len(), phys.len());
        }
    }

    #[test]
    fn join_never_panics(raw in cvd_string(), order in ".{0,12}", n in 0u32..4, modes in prop::collection::vec(-2i32..6, 4)) {
        let driver: Vec<DriverDevice> = (0..n)
            .map(|i| DriverDevice {
                ordinal: i as i32,
                name: "GPU".into(),
                pci_bus_id: format!("0000:{:02x}:00.0", i + 1),
                uuid: format!("GPU-a{i}"),
                total_mem_bytes: 1 << 30,
                compute_mode: modes[i as usize],
            })
            .collect();
        let t = Topology::join(&driver, None, Some(&raw), Some(&order));
        prop_assert_eq!(t.devices.len(), n as usize);
        for r in -2..6 {
            let _ = seedance_topology::invalid_ordinal(r, &t);
            let _ = seedance_topology::device_unavailable(r, &t);
            let _ = seedance_topology::context_out_of_memory(r, &t);
            let _ = seedance_topology::fallback_applied(r, 0, "x", &t);
        }
    }

    #[test]
    fn exclusions_never_panic(raw in any::<String>(), list in prop::collection::vec("[0-9a-fA-FGPU:.-]{0,14}", 0..6)) {
        for s in [raw, list.join(",")] {
            let (sels, warnings) = parse_exclusions(&s);
            let nonempty = s.split(',').filter(|e| !e.trim().is_empty()).count();
            prop_assert_eq!(sels.len() + warnings.len(), nonempty);
            let d = seedance_topology::VisibleDevice {
                ordinal: 0,
                name: String::new(),
                pci_bus_id: "0000:01:00.0".into(),
                uuid: "GPU-ab".into(),
                nvml_index: None,
                physical_index: None,
                total_mem_bytes: 0,
                free_mem_bytes: None,
                compute_mode: seedance_topology::ComputeMode::Default,
                busy_processes: None,
            };
            for sel in &sels {
                let _ = selector_matches(sel, &d);
            }
        }
    }
}
