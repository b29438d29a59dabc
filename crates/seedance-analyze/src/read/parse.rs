//! Parsing one line of a trace.
//!
//! [`parse_line`] parses in two steps: one pass into borrowed fields (the envelope, the
//! `event` kind and the `call_failed` fields, which are most of a big trace), then, only for
//! the rare kinds (`session_start`, `exit_summary`, `device_fault`, `device_fallback`,
//! `launch_fault`, `alloc_fault`), a second pass into the lenient types of
//! [`crate::read::records`].

use crate::read::line::{CallFailedRef, Head, Line, RawArgs, KNOWN_KINDS};
use crate::read::records::{
    AllocFaultInfo, CallFailedRepeatsInfo, DeviceFallbackInfo, DeviceFaultInfo, ExitInfo,
    LaunchFaultInfo, LifetimeFaultInfo, LifetimeRepairInfo, SessionInfo, StrayInfo, TraceCutInfo,
};
use serde::de::{self, IgnoredAny, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// A string that borrows from the line when it has no escapes and is owned otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Str<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

/// The first, loose pass over a line: envelope, kind, and the `call_failed` fields.
/// Unknown fields are skipped without being built.
#[derive(Deserialize)]
struct Flat<'a> {
    v: Option<u32>,
    seq: Option<u64>,
    ts_ns: Option<u64>,
    pid: Option<u32>,
    tid: Option<u64>,
    #[serde(borrow)]
    event: Option<Str<'a>>,
    #[serde(borrow)]
    function: Option<Str<'a>>,
    result: Option<u32>,
    #[serde(borrow)]
    result_name: Option<Str<'a>>,
    #[serde(borrow)]
    args: Option<&'a RawValue>,
}

/// The fallback pass, for records of unknown kinds whose fields clash in type with the
/// `call_failed` fields of [`Flat`].
#[derive(Deserialize)]
struct Envelope<'a> {
    v: Option<u32>,
    seq: Option<u64>,
    ts_ns: Option<u64>,
    pid: Option<u32>,
    tid: Option<u64>,
    #[serde(borrow)]
    event: Option<Str<'a>>,
}

fn head_of(
    v: Option<u32>,
    seq: Option<u64>,
    ts_ns: Option<u64>,
    pid: Option<u32>,
    tid: Option<u64>,
) -> Option<Head> {
    Some(Head {
        v: v?,
        seq: seq?,
        ts_ns: ts_ns?,
        pid: pid?,
        tid: tid.unwrap_or(0),
    })
}

/// Parses one line (without its newline). Never panics, whatever the bytes.
///
/// A `call_failed` record in the shim's usual shape is read by a hand-written scanner
/// ([`crate::read::fast`]); every other line, and any line the scanner is unsure of, by serde.
pub fn parse_line(line: &[u8]) -> Line<'_> {
    let line = trim_ascii(line);
    if line.first() == Some(&b'{') {
        if let Some((head, c)) = std::str::from_utf8(line)
            .ok()
            .and_then(crate::read::fast::call_failed)
        {
            return Line::CallFailed(head, c);
        }
    }
    parse_line_serde(line)
}

/// [`parse_line`] of a line known to be UTF-8 (the same answer, without checking it again).
pub(crate) fn parse_text(line: &str) -> Line<'_> {
    let line = line.trim_ascii();
    if line.starts_with('{') {
        if let Some((head, c)) = crate::read::fast::call_failed(line) {
            return Line::CallFailed(head, c);
        }
    }
    parse_line_serde(line.as_bytes())
}

/// [`parse_line`] without the fast path: serde only.
pub(crate) fn parse_line_serde(line: &[u8]) -> Line<'_> {
    let line = trim_ascii(line);
    if line.is_empty() {
        return Line::Blank;
    }
    if line[0] != b'{' {
        // Records are objects; anything else is at best some other JSON.
        return if serde_json::from_slice::<IgnoredAny>(line).is_ok() {
            Line::NotRecord
        } else {
            Line::Malformed
        };
    }
    match serde_json::from_slice::<Flat>(line) {
        Ok(f) => {
            let (Some(head), Some(kind)) = (head_of(f.v, f.seq, f.ts_ns, f.pid, f.tid), f.event)
            else {
                return Line::NotRecord;
            };
            classify(
                line,
                head,
                kind.0,
                f.function,
                f.result,
                f.result_name,
                f.args,
            )
        }
        Err(_) => match serde_json::from_slice::<Envelope>(line) {
            Ok(e) => {
                let (Some(head), Some(kind)) =
                    (head_of(e.v, e.seq, e.ts_ns, e.pid, e.tid), e.event)
                else {
                    return Line::NotRecord;
                };
                if KNOWN_KINDS.contains(&kind.0.as_ref()) {
                    Line::BadRecord(head, known_kind(&kind.0))
                } else {
                    Line::Unknown(head, kind.0)
                }
            }
            Err(_) => {
                if serde_json::from_slice::<IgnoredAny>(line).is_ok() {
                    Line::NotRecord
                } else {
                    Line::Malformed
                }
            }
        },
    }
}

fn known_kind(kind: &str) -> &'static str {
    KNOWN_KINDS
        .iter()
        .copied()
        .find(|k| *k == kind)
        .unwrap_or("unknown")
}

fn classify<'a>(
    line: &'a [u8],
    head: Head,
    kind: Cow<'a, str>,
    function: Option<Str<'a>>,
    result: Option<u32>,
    result_name: Option<Str<'a>>,
    args: Option<&'a RawValue>,
) -> Line<'a> {
    match kind.as_ref() {
        "call_failed" => match (function, result) {
            (Some(function), Some(result)) => Line::CallFailed(
                head,
                CallFailedRef {
                    function: function.0,
                    result,
                    result_name: result_name.map(|s| s.0),
                    args: args.map(|a| RawArgs(a.get())),
                },
            ),
            _ => Line::BadRecord(head, "call_failed"),
        },
        "session_start" => match serde_json::from_slice::<SessionInfo>(line) {
            Ok(s) => Line::SessionStart(head, Box::new(s)),
            Err(_) => Line::BadRecord(head, "session_start"),
        },
        "exit_summary" => match serde_json::from_slice::<ExitInfo>(line) {
            Ok(s) => Line::ExitSummary(head, Box::new(s)),
            Err(_) => Line::BadRecord(head, "exit_summary"),
        },
        "device_fault" => match serde_json::from_slice::<DeviceFaultInfo>(line) {
            Ok(s) => Line::DeviceFault(head, Box::new(s)),
            Err(_) => Line::BadRecord(head, "device_fault"),
        },
        "device_fallback" => match serde_json::from_slice::<DeviceFallbackInfo>(line) {
            Ok(s) => Line::DeviceFallback(head, Box::new(s)),
            Err(_) => Line::BadRecord(head, "device_fallback"),
        },
        "launch_fault" => match serde_json::from_slice::<LaunchFaultInfo>(line) {
            Ok(s) => Line::LaunchFault(head, Box::new(s)),
            Err(_) => Line::BadRecord(head, "launch_fault"),
        },
        "alloc_fault" => match serde_json::from_slice::<AllocFaultInfo>(line) {
            Ok(s) => Line::AllocFault(head, Box::new(s)),
            Err(_) => Line::BadRecord(head, "alloc_fault"),
        },
        "lifetime_fault" => match serde_json::from_slice::<LifetimeFaultInfo>(line) {
            Ok(s) => Line::LifetimeFault(head, Box::new(s)),
            Err(_) => Line::BadRecord(head, "lifetime_fault"),
        },
        "lifetime_repair" => match serde_json::from_slice::<LifetimeRepairInfo>(line) {
            Ok(s) => Line::LifetimeRepair(head, Box::new(s)),
            Err(_) => Line::BadRecord(head, "lifetime_repair"),
        },
        "stray_context" => match serde_json::from_slice::<StrayInfo>(line) {
            Ok(s) => Line::StrayContext(head, Box::new(s)),
            Err(_) => Line::BadRecord(head, "stray_context"),
        },
        "host_hazard" => match serde_json::from_slice::<LifetimeFaultInfo>(line) {
            Ok(s) => Line::HostHazard(head, Box::new(s)),
            Err(_) => Line::BadRecord(head, "host_hazard"),
        },
        "call_failed_repeats" => match serde_json::from_slice::<CallFailedRepeatsInfo>(line) {
            Ok(s) => Line::CallFailedRepeats(head, Box::new(s)),
            Err(_) => Line::BadRecord(head, "call_failed_repeats"),
        },
        "trace_cut" => match serde_json::from_slice::<TraceCutInfo>(line) {
            Ok(s) => Line::TraceCut(head, Box::new(s)),
            Err(_) => Line::BadRecord(head, "trace_cut"),
        },
        _ => Line::Unknown(head, kind),
    }
}

fn trim_ascii(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if first.is_ascii_whitespace() {
            s = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = s {
        if last.is_ascii_whitespace() {
            s = rest;
        } else {
            break;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_call_failed_borrowed() {
        let l = br#"{"v":1,"seq":3,"ts_ns":10,"pid":42,"tid":43,"event":"call_failed","function":"cuMemAlloc_v2","result":2,"result_name":"CUDA_ERROR_OUT_OF_MEMORY","args":{"bytesize":1}}"#;
        match parse_line(l) {
            Line::CallFailed(h, c) => {
                assert_eq!(h.pid, 42);
                assert!(matches!(c.function, Cow::Borrowed("cuMemAlloc_v2")));
                assert_eq!(c.result, 2);
                assert_eq!(c.args.unwrap().get(), r#"{"bytesize":1}"#);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_kind_with_clashing_field_types() {
        let l = br#"{"v":3,"seq":3,"ts_ns":10,"pid":42,"tid":43,"event":"launch_explained","result":"moved","function":7}"#;
        match parse_line(l) {
            Line::Unknown(h, k) => {
                assert_eq!(k, "launch_explained");
                assert_eq!(h.v, 3);
            }
            other => panic!("{other:?}"),
        }
        // A known kind with fields of the wrong type is a bad record, not an unknown one.
        let l = br#"{"v":2,"seq":3,"ts_ns":10,"pid":42,"tid":43,"event":"device_fallback","result":"moved","function":7}"#;
        assert!(matches!(
            parse_line(l),
            Line::BadRecord(_, "device_fallback")
        ));
    }

    #[test]
    fn parses_device_fault_and_fallback() {
        let l = br#"{"v":2,"seq":1,"ts_ns":10,"pid":42,"tid":42,"event":"device_fault","function":"cuDeviceGet","requested_ordinal":1,"result":101,"result_name":"CUDA_ERROR_INVALID_DEVICE","fault":"invalid_ordinal","visible_devices":1,"explanation":"ordinal 1 requested, 1 device visible","later":[1]}"#;
        match parse_line(l) {
            Line::DeviceFault(h, f) => {
                assert_eq!(h.seq, 1);
                assert_eq!(
                    (f.function.as_str(), f.requested_ordinal, f.result),
                    ("cuDeviceGet", 1, 101)
                );
                assert_eq!(f.fault, "invalid_ordinal");
                assert_eq!(f.explanation, "ordinal 1 requested, 1 device visible");
            }
            other => panic!("{other:?}"),
        }
        let l = br#"{"v":2,"seq":2,"ts_ns":11,"pid":42,"tid":42,"event":"device_fallback","function":"cuDeviceGet","requested_ordinal":1,"chosen_ordinal":0,"chosen_pci_bus_id":null,"reason":"ordinal 1 is not visible","result":0,"explanation":"fix: ordinal 1 -> ordinal 0"}"#;
        match parse_line(l) {
            Line::DeviceFallback(_, f) => {
                assert_eq!((f.requested_ordinal, f.chosen_ordinal), (1, 0));
                assert_eq!(f.chosen_pci_bus_id, None);
            }
            other => panic!("{other:?}"),
        }
        // Without the ordinals the record says nothing: malformed.
        let l = br#"{"v":2,"seq":2,"ts_ns":11,"pid":42,"tid":42,"event":"device_fallback","function":"cuDeviceGet"}"#;
        assert!(matches!(
            parse_line(l),
            Line::BadRecord(_, "device_fallback")
        ));
        let l = br#"{"v":2,"seq":2,"ts_ns":11,"pid":42,"tid":42,"event":"device_fault","requested_ordinal":1}"#;
        assert!(matches!(parse_line(l), Line::BadRecord(_, "device_fault")));
    }

    #[test]
    fn session_topology_is_lenient() {
        let base = r#"{"v":2,"seq":0,"ts_ns":1,"pid":1,"tid":1,"event":"session_start","mode":"fix","devices":[]"#;
        let good = format!(
            r#"{base},"topology":{{"devices":[{{"ordinal":0,"uuid":"GPU-1","compute_mode":{{"unknown":7}},"physical_index":1}}],"visibility":{{"stopped_at":{{"position":2,"entry":"9","reason":"is out of range for 2 GPUs"}}}},"device_order":"PCI_BUS_ID","order_warning":null,"nvml":{{"present":false,"reason":"not found"}}}}}}"#
        );
        match parse_line(good.as_bytes()) {
            Line::SessionStart(_, s) => {
                let t = s.topology.unwrap();
                assert_eq!(t.devices[0].compute_mode.as_deref(), Some("7"));
                assert_eq!(t.devices[0].physical_index, Some(1));
                assert_eq!(t.visibility.stopped_at.unwrap().entry, "9");
                assert_eq!(t.nvml.reason.as_deref(), Some("not found"));
            }
            other => panic!("{other:?}"),
        }
        // A topology of the wrong shape is dropped; the session start is kept.
        let bad = format!(r#"{base},"topology":{{"devices":"none"}}}}"#);
        match parse_line(bad.as_bytes()) {
            Line::SessionStart(_, s) => {
                assert_eq!(s.mode, "fix");
                assert_eq!(s.topology, None);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn classification() {
        assert!(matches!(parse_line(b"  \r"), Line::Blank));
        assert!(matches!(parse_line(b"{\"v\":1,"), Line::Malformed));
        assert!(matches!(parse_line(b"[1,2]"), Line::NotRecord));
        assert!(matches!(parse_line(b"{\"name\":\"x\"}"), Line::NotRecord));
        assert!(matches!(
            parse_line(br#"{"v":1,"seq":0,"ts_ns":1,"pid":1,"tid":1,"event":"call_failed"}"#),
            Line::BadRecord(_, "call_failed")
        ));
        assert!(matches!(parse_line(b"\xff\xfe"), Line::Malformed));
    }
}
