//! `CUDA_VISIBLE_DEVICES` as the driver reads it.
//!
//! Source: CUDA C++ Programming Guide, "CUDA Environment Variables" (and the MIG user
//! guide for the `MIG-` forms). The variable is a comma-separated list of GPU identifiers:
//! integer indices, `GPU-` UUIDs (or a prefix long enough to name one GPU, such as
//! `GPU-8f2a`), or MIG ids (`MIG-<uuid>`, legacy `MIG-GPU-<uuid>/<gi>/<ci>`). The listed
//! devices become CUDA ordinals 0, 1, ... in list order. At the first invalid entry the
//! driver stops: "only the devices whose index precedes the invalid index are visible"
//! (`0,2,-1,1` shows devices 0 and 2). Unset means every device is visible; set but empty
//! means none is.
//!
//! [`parse`] does the syntax only; [`resolve`] applies the stopping rule against the
//! physical devices (in the order an integer entry counts them), and [`resolve_by_count`]
//! infers the same from the number of devices the driver reports when the physical list is
//! not known (no NVML). [`describe`] turns the result into one line of text.
//!
//! Assumptions not stated by the documentation, kept deliberately simple (the joined
//! [`crate::model::Topology`] checks the prediction against the devices the driver
//! actually reports and falls back to [`resolve_by_count`] when they disagree): surrounding
//! whitespace of an entry is ignored; an index is decimal digits only (so `-1` is invalid);
//! UUID hex digits compare case-insensitively while the `GPU-`/`MIG-` prefixes are upper
//! case; a repeated device is invalid; an index too large for `u32` is out of range.

use seedance_core::text::clip;
use serde::{Deserialize, Serialize};

/// The syntax of `CUDA_VISIBLE_DEVICES` (no knowledge of the devices yet).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VisibleSpec {
    /// The variable is not set: every device is visible, in the driver's order.
    Unset,
    /// The variable is set (possibly to an empty string, which hides every device).
    Set {
        /// The value exactly as found in the environment.
        raw: String,
        /// The comma-separated entries, in order; empty when `raw` is empty or only
        /// whitespace.
        entries: Vec<Entry>,
    },
}

/// One comma-separated entry of `CUDA_VISIBLE_DEVICES`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Position in the list, counting from 1.
    pub position: usize,
    /// The entry with surrounding whitespace removed.
    pub text: String,
    /// What the entry says.
    pub kind: EntryKind,
}

/// What one entry of `CUDA_VISIBLE_DEVICES` names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// A physical device index (decimal). Values too large for `u32` are stored as
    /// `u32::MAX`, which is out of range on every host.
    Index(u32),
    /// A GPU UUID or a prefix of one, as written, e.g. `GPU-8f2a` or
    /// `GPU-8f2a1c3e-0b1d-4c5e-9f00-112233445566`.
    GpuUuid(String),
    /// A MIG device.
    Mig(MigId),
    /// Not a valid identifier; the text is the reason as a predicate, e.g. `is empty`.
    Invalid(String),
}

/// A MIG device identifier (CUDA MIG user guide, "CUDA Device Enumeration").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MigId {
    /// `MIG-<uuid>` (driver R470 and later): the whole entry as written.
    Uuid(String),
    /// Legacy `MIG-GPU-<gpu uuid>/<GPU instance id>/<compute instance id>`.
    Legacy {
        /// The parent GPU's UUID, `GPU-...`.
        gpu_uuid: String,
        /// GPU instance id.
        gpu_instance: u32,
        /// Compute instance id.
        compute_instance: u32,
    },
}

/// One physical device, as an integer `CUDA_VISIBLE_DEVICES` entry counts it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhysicalId {
    /// The index an integer `CUDA_VISIBLE_DEVICES` entry uses for this device: the
    /// driver's enumeration order before the variable is applied (PCI bus order with
    /// `CUDA_DEVICE_ORDER=PCI_BUS_ID`; fastest first by default, which on a host of
    /// identical GPUs is PCI order too). NVML's index when built from an NVML snapshot.
    pub index: u32,
    /// UUID as `nvidia-smi -L` prints it: `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
    pub uuid: String,
    /// PCI bus id, normalized `0000:1a:00.0` (see [`crate::pci::normalize_pci_bus_id`]).
    pub pci_bus_id: String,
}

/// One CUDA ordinal after `CUDA_VISIBLE_DEVICES` is applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VisibleOrdinal {
    /// The CUDA ordinal (0-based, as `cuDeviceGet` takes it).
    pub ordinal: u32,
    /// The physical index ([`PhysicalId::index`]) it is, when known. Always `None` for
    /// MIG entries (a MIG instance is part of a GPU, not a GPU).
    pub physical_index: Option<u32>,
    /// The `CUDA_VISIBLE_DEVICES` entry that made it visible (`None` when unset).
    pub entry: Option<String>,
}

/// Where and why the driver stopped reading `CUDA_VISIBLE_DEVICES`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stop {
    /// Position of the first invalid entry, counting from 1.
    pub position: usize,
    /// The invalid entry, whitespace removed.
    pub entry: String,
    /// Why it is invalid, as a predicate: `is out of range for 2 GPUs`.
    pub reason: String,
}

/// The CUDA ordinals `CUDA_VISIBLE_DEVICES` leaves, and where the driver stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Visibility {
    /// `CUDA_VISIBLE_DEVICES` as found (`None` when unset), at most
    /// [`seedance_core::text::MAX_SHOWN`] bytes of it ([`seedance_core::text::clip`]: a
    /// longer value ends `... (N bytes)`), as are the entries in `ordinals` and `stopped_at`.
    pub cuda_visible_devices: Option<String>,
    /// Number of physical devices the entries were checked against; `None` when the
    /// result was inferred from the driver's device count ([`resolve_by_count`]).
    pub physical_count: Option<u32>,
    /// The visible ordinals, 0, 1, ... in order.
    pub ordinals: Vec<VisibleOrdinal>,
    /// The first invalid entry, if any: it and every entry after it were ignored.
    pub stopped_at: Option<Stop>,
}

/// Parses the syntax of `CUDA_VISIBLE_DEVICES` (`None` = unset). Never fails: a bad entry
/// becomes [`EntryKind::Invalid`].
pub fn parse(raw: Option<&str>) -> VisibleSpec {
    let Some(raw) = raw else {
        return VisibleSpec::Unset;
    };
    let entries = if raw.trim().is_empty() {
        Vec::new()
    } else {
        raw.split(',')
            .enumerate()
            .map(|(i, e)| {
                let text = e.trim();
                Entry {
                    position: i + 1,
                    text: text.to_string(),
                    kind: entry_kind(text),
                }
            })
            .collect()
    };
    VisibleSpec::Set {
        raw: raw.to_string(),
        entries,
    }
}

fn is_uuid_body(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_hexdigit())
        && s.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

fn entry_kind(text: &str) -> EntryKind {
    if text.is_empty() {
        return EntryKind::Invalid("is empty".into());
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return EntryKind::Index(text.parse::<u32>().unwrap_or(u32::MAX));
    }
    if let Some(body) = text.strip_prefix("GPU-") {
        return if is_uuid_body(body) {
            EntryKind::GpuUuid(text.to_string())
        } else {
            EntryKind::Invalid("is not a valid GPU UUID".into())
        };
    }
    if let Some(body) = text.strip_prefix("MIG-") {
        if body.starts_with("GPU-") {
            let parts: Vec<&str> = body.split('/').collect();
            if let [gpu, gi, ci] = parts.as_slice() {
                let num = |s: &str| {
                    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                        .then(|| s.parse::<u32>().ok())
                        .flatten()
                };
                if let (true, Some(gi), Some(ci)) = (is_uuid_body(&gpu[4..]), num(gi), num(ci)) {
                    return EntryKind::Mig(MigId::Legacy {
                        gpu_uuid: gpu.to_string(),
                        gpu_instance: gi,
                        compute_instance: ci,
                    });
                }
            }
            return EntryKind::Invalid("is not a valid MIG id (MIG-GPU-<uuid>/<gi>/<ci>)".into());
        }
        return if is_uuid_body(body) {
            EntryKind::Mig(MigId::Uuid(text.to_string()))
        } else {
            EntryKind::Invalid("is not a valid MIG id".into())
        };
    }
    EntryKind::Invalid("is not a GPU index, a GPU- UUID or a MIG- id".into())
}

fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}

/// Applies `CUDA_VISIBLE_DEVICES` to the physical devices, as the driver does: entries in
/// order become ordinals 0, 1, ...; the first entry that is invalid (bad syntax, an index
/// no device has, a UUID prefix matching no device or several, a device already listed)
/// stops the list, and it and everything after it are ignored.
///
/// `physical` is in the order integer entries count devices (see [`PhysicalId::index`]).
/// MIG entries cannot be checked against `physical` (it holds no MIG inventory): they are
/// accepted unless repeated, with an unknown physical index.
pub fn resolve(spec: &VisibleSpec, physical: &[PhysicalId]) -> Visibility {
    let physical_count = Some(u32::try_from(physical.len()).unwrap_or(u32::MAX));
    let VisibleSpec::Set { raw, entries } = spec else {
        return Visibility {
            cuda_visible_devices: None,
            physical_count,
            ordinals: physical
                .iter()
                .enumerate()
                .map(|(i, p)| VisibleOrdinal {
                    ordinal: i as u32,
                    physical_index: Some(p.index),
                    entry: None,
                })
                .collect(),
            stopped_at: None,
        };
    };
    let mut ordinals: Vec<VisibleOrdinal> = Vec::new();
    let mut stopped_at = None;
    for e in entries {
        let found: Result<Option<u32>, String> = match &e.kind {
            EntryKind::Invalid(r) => Err(r.clone()),
            EntryKind::Index(i) => physical
                .iter()
                .find(|p| p.index == *i)
                .map(|p| Some(p.index))
                .ok_or_else(|| {
                    format!(
                        "is out of range for {}",
                        plural(physical.len(), "GPU", "GPUs")
                    )
                }),
            EntryKind::GpuUuid(prefix) => {
                let hits: Vec<&PhysicalId> = physical
                    .iter()
                    .filter(|p| starts_with_ci(&p.uuid, prefix))
                    .collect();
                match hits.as_slice() {
                    [] => Err("matches no GPU's UUID".to_string()),
                    [p] => Ok(Some(p.index)),
                    many => Err(format!(
                        "is ambiguous: it begins the UUIDs of {} GPUs ({})",
                        many.len(),
                        many.iter()
                            .map(|p| format!("physical GPU {}", p.index))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                }
            }
            EntryKind::Mig(_) => {
                match ordinals.iter().find(|o| {
                    o.entry
                        .as_deref()
                        .is_some_and(|t| t.eq_ignore_ascii_case(&e.text))
                }) {
                    Some(o) => Err(format!("repeats ordinal {}", o.ordinal)),
                    None => Ok(None),
                }
            }
        };
        let found = found.and_then(|p| match p {
            Some(p) => match ordinals.iter().find(|o| o.physical_index == Some(p)) {
                Some(o) => Err(format!(
                    "repeats physical GPU {p} (already ordinal {})",
                    o.ordinal
                )),
                None => Ok(Some(p)),
            },
            None => Ok(None),
        });
        match found {
            Ok(physical_index) => ordinals.push(VisibleOrdinal {
                ordinal: ordinals.len() as u32,
                physical_index,
                entry: Some(clip(&e.text)),
            }),
            Err(reason) => {
                stopped_at = Some(Stop {
                    position: e.position,
                    entry: clip(&e.text),
                    reason,
                });
                break;
            }
        }
    }
    Visibility {
        cuda_visible_devices: Some(clip(raw)),
        physical_count,
        ordinals,
        stopped_at,
    }
}

/// Infers [`Visibility`] from the number of devices the driver reports
/// (`cuDeviceGetCount`) when the physical devices are unknown (no NVML): the first
/// `visible_count` entries are the ones the driver accepted, in order, and the next one is
/// where it stopped. Integer entries give the physical index; other entries leave it
/// unknown. When unset, ordinal `i` is physical device `i` by definition.
pub fn resolve_by_count(spec: &VisibleSpec, visible_count: usize) -> Visibility {
    let VisibleSpec::Set { raw, entries } = spec else {
        return Visibility {
            cuda_visible_devices: None,
            physical_count: None,
            ordinals: (0..visible_count)
                .map(|i| VisibleOrdinal {
                    ordinal: i as u32,
                    physical_index: Some(i as u32),
                    entry: None,
                })
                .collect(),
            stopped_at: None,
        };
    };
    let ordinals: Vec<VisibleOrdinal> = (0..visible_count)
        .map(|i| {
            let e = entries.get(i);
            VisibleOrdinal {
                ordinal: i as u32,
                physical_index: match e.map(|e| &e.kind) {
                    Some(EntryKind::Index(p)) => Some(*p),
                    _ => None,
                },
                entry: e.map(|e| clip(&e.text)),
            }
        })
        .collect();
    let stopped_at = entries.get(visible_count).map(|e| {
        let earlier = entries[..visible_count]
            .iter()
            .position(|x| match (&x.kind, &e.kind) {
                (EntryKind::Index(a), EntryKind::Index(b)) => a == b,
                (EntryKind::GpuUuid(a), EntryKind::GpuUuid(b)) => a.eq_ignore_ascii_case(b),
                (EntryKind::Mig(_), EntryKind::Mig(_)) => x.text.eq_ignore_ascii_case(&e.text),
                _ => false,
            });
        let reason = match (&e.kind, earlier) {
            (EntryKind::Invalid(r), _) => r.clone(),
            (_, Some(o)) => format!("repeats ordinal {o}"),
            (EntryKind::Index(i), None) => {
                format!("was rejected by the driver (no GPU has index {i} here)")
            }
            (EntryKind::GpuUuid(_), None) => {
                "was rejected by the driver (it matches no GPU's UUID, or several)".to_string()
            }
            (EntryKind::Mig(_), None) => {
                "was rejected by the driver (no such MIG device)".to_string()
            }
        };
        Stop {
            position: e.position,
            entry: clip(&e.text),
            reason,
        }
    });
    Visibility {
        cuda_visible_devices: Some(clip(raw)),
        physical_count: None,
        ordinals,
        stopped_at,
    }
}

fn starts_with_ci(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len()
        && s.is_char_boundary(prefix.len())
        && s[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// `CUDA_VISIBLE_DEVICES=<value>`, quoted when the value is empty or holds whitespace. A
/// value [`clip`]ped to its first bytes (longer than `MAX_SHOWN`, which only a clipped one
/// is) keeps its `... (N bytes)` outside the quotes.
pub(crate) fn assignment(raw: &str) -> String {
    let (value, tail) = match raw.rfind("... (") {
        Some(i) if raw.len() > seedance_core::text::MAX_SHOWN => raw.split_at(i),
        _ => (raw, ""),
    };
    if value.is_empty() || value.chars().any(char::is_whitespace) {
        format!("CUDA_VISIBLE_DEVICES={value:?}{tail}")
    } else {
        format!("CUDA_VISIBLE_DEVICES={value}{tail}")
    }
}

/// What an ordinal is, in words: `physical GPU 1`, or the entry (`MIG-...`) when the
/// physical index is unknown.
pub(crate) fn who(o: &VisibleOrdinal) -> String {
    match (&o.physical_index, &o.entry) {
        (Some(p), _) => format!("physical GPU {p}"),
        (None, Some(e)) => e.clone(),
        (None, None) => "an unidentified GPU".to_string(),
    }
}

pub(crate) fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// One line saying what `CUDA_VISIBLE_DEVICES` did, e.g.
/// `CUDA_VISIBLE_DEVICES=1 made physical GPU 1 ordinal 0`, or, when the driver stopped at
/// an invalid entry, `CUDA_VISIBLE_DEVICES=0,7,1: entry "7" (position 2) is out of range
/// for 2 GPUs; the driver ignores it and everything after it, so only ordinal 0 (physical
/// GPU 0) is visible`.
pub fn describe(v: &Visibility) -> String {
    let n = v.ordinals.len();
    let Some(raw) = &v.cuda_visible_devices else {
        return match n {
            0 => "CUDA_VISIBLE_DEVICES is not set and the driver reports no GPU".to_string(),
            1 => "CUDA_VISIBLE_DEVICES is not set: the one GPU is ordinal 0".to_string(),
            _ => format!(
                "CUDA_VISIBLE_DEVICES is not set: all {n} GPUs are visible, ordinal N being physical GPU N"
            ),
        };
    };
    let set = assignment(raw);
    if let Some(stop) = &v.stopped_at {
        let rest = match v.ordinals.as_slice() {
            [] => "no GPU is visible".to_string(),
            [o] => format!("only ordinal {} ({}) is visible", o.ordinal, who(o)),
            os => format!(
                "only {} are visible",
                and_list(
                    &os.iter()
                        .map(|o| format!("ordinal {} ({})", o.ordinal, who(o)))
                        .collect::<Vec<_>>()
                )
            ),
        };
        return format!(
            "{set}: entry {:?} (position {}) {}; the driver ignores it and everything after it, so {rest}",
            stop.entry, stop.position, stop.reason
        );
    }
    if raw.trim().is_empty() {
        return format!("{set} (set but empty) hides every GPU");
    }
    if n == 0 {
        return format!("{set} leaves no GPU visible");
    }
    let made: Vec<String> = v
        .ordinals
        .iter()
        .map(|o| format!("{} ordinal {}", who(o), o.ordinal))
        .collect();
    format!("{set} made {}", and_list(&made))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phys(n: u32) -> Vec<PhysicalId> {
        (0..n)
            .map(|i| PhysicalId {
                index: i,
                uuid: format!("GPU-{i}{i}{i}{i}aaaa-0000-0000-0000-00000000000{i}"),
                pci_bus_id: format!("0000:{:02x}:00.0", 0x11 + 0x10 * i),
            })
            .collect()
    }

    fn ords(v: &Visibility) -> Vec<Option<u32>> {
        v.ordinals.iter().map(|o| o.physical_index).collect()
    }

    #[test]
    fn parse_syntax() {
        assert_eq!(parse(None), VisibleSpec::Unset);
        assert_eq!(
            parse(Some("")),
            VisibleSpec::Set {
                raw: String::new(),
                entries: vec![]
            }
        );
        let VisibleSpec::Set { entries, .. } = parse(Some(
            " 1 , GPU-8F2a,MIG-GPU-abc/1/0,MIG-12ab,x,,-1,99999999999",
        )) else {
            panic!()
        };
        let kinds: Vec<EntryKind> = entries.iter().map(|e| e.kind.clone()).collect();
        assert_eq!(
            kinds,
            vec![
                EntryKind::Index(1),
                EntryKind::GpuUuid("GPU-8F2a".into()),
                EntryKind::Mig(MigId::Legacy {
                    gpu_uuid: "GPU-abc".into(),
                    gpu_instance: 1,
                    compute_instance: 0
                }),
                EntryKind::Mig(MigId::Uuid("MIG-12ab".into())),
                EntryKind::Invalid("is not a GPU index, a GPU- UUID or a MIG- id".into()),
                EntryKind::Invalid("is empty".into()),
                EntryKind::Invalid("is not a GPU index, a GPU- UUID or a MIG- id".into()),
                EntryKind::Index(u32::MAX),
            ]
        );
        assert_eq!(entries[1].position, 2);
        assert_eq!(entries[1].text, "GPU-8F2a");
        assert!(matches!(entry_kind("GPU-"), EntryKind::Invalid(_)));
        assert!(matches!(entry_kind("GPU-zz"), EntryKind::Invalid(_)));
        assert!(matches!(entry_kind("MIG-GPU-abc/1"), EntryKind::Invalid(_)));
        assert!(matches!(entry_kind("MIG-"), EntryKind::Invalid(_)));
        assert!(matches!(entry_kind("gpu-abc"), EntryKind::Invalid(_)));
    }

    #[test]
    fn unset_shows_all() {
        let v = resolve(&parse(None), &phys(2));
        assert_eq!(ords(&v), vec![Some(0), Some(1)]);
        assert_eq!(v.stopped_at, None);
        assert_eq!(
            describe(&v),
            "CUDA_VISIBLE_DEVICES is not set: all 2 GPUs are visible, ordinal N being physical GPU N"
        );
        assert_eq!(
            describe(&resolve(&parse(None), &phys(1))),
            "CUDA_VISIBLE_DEVICES is not set: the one GPU is ordinal 0"
        );
        assert_eq!(
            describe(&resolve(&parse(None), &[])),
            "CUDA_VISIBLE_DEVICES is not set and the driver reports no GPU"
        );
    }

    #[test]
    fn one_remapped() {
        let v = resolve(&parse(Some("1")), &phys(2));
        assert_eq!(ords(&v), vec![Some(1)]);
        assert_eq!(
            describe(&v),
            "CUDA_VISIBLE_DEVICES=1 made physical GPU 1 ordinal 0"
        );
        let v = resolve(&parse(Some("2,0, 1")), &phys(3));
        assert_eq!(ords(&v), vec![Some(2), Some(0), Some(1)]);
        assert_eq!(
            describe(&v),
            "CUDA_VISIBLE_DEVICES=\"2,0, 1\" made physical GPU 2 ordinal 0, physical GPU 0 ordinal 1 and physical GPU 1 ordinal 2"
        );
    }

    #[test]
    fn stops_at_out_of_range() {
        let v = resolve(&parse(Some("0,7,1")), &phys(2));
        assert_eq!(ords(&v), vec![Some(0)]);
        assert_eq!(
            v.stopped_at,
            Some(Stop {
                position: 2,
                entry: "7".into(),
                reason: "is out of range for 2 GPUs".into()
            })
        );
        assert_eq!(
            describe(&v),
            "CUDA_VISIBLE_DEVICES=0,7,1: entry \"7\" (position 2) is out of range for 2 GPUs; the driver ignores it and everything after it, so only ordinal 0 (physical GPU 0) is visible"
        );
    }

    #[test]
    fn documented_example_minus_one() {
        // The programming guide's example: 0,2,-1,1 shows devices 0 and 2.
        let v = resolve(&parse(Some("0,2,-1,1")), &phys(3));
        assert_eq!(ords(&v), vec![Some(0), Some(2)]);
        assert_eq!(
            describe(&v),
            "CUDA_VISIBLE_DEVICES=0,2,-1,1: entry \"-1\" (position 3) is not a GPU index, a GPU- UUID or a MIG- id; the driver ignores it and everything after it, so only ordinal 0 (physical GPU 0) and ordinal 1 (physical GPU 2) are visible"
        );
        let v = resolve(&parse(Some("-1")), &phys(3));
        assert!(v.ordinals.is_empty());
        assert_eq!(
            describe(&v),
            "CUDA_VISIBLE_DEVICES=-1: entry \"-1\" (position 1) is not a GPU index, a GPU- UUID or a MIG- id; the driver ignores it and everything after it, so no GPU is visible"
        );
    }

    #[test]
    fn empty_hides_all() {
        let v = resolve(&parse(Some("")), &phys(2));
        assert!(v.ordinals.is_empty());
        assert_eq!(v.stopped_at, None);
        assert_eq!(
            describe(&v),
            "CUDA_VISIBLE_DEVICES=\"\" (set but empty) hides every GPU"
        );
        let v = resolve(&parse(Some("0,")), &phys(2));
        assert_eq!(ords(&v), vec![Some(0)]);
        assert_eq!(v.stopped_at.unwrap().reason, "is empty");
    }

    #[test]
    fn uuids_and_prefixes() {
        let mut p = phys(3);
        p[2].uuid = "GPU-1111bbbb-0000-0000-0000-000000000002".into();
        let v = resolve(&parse(Some("GPU-0000,gpu-1")), &p);
        assert_eq!(ords(&v), vec![Some(0)]);
        assert_eq!(
            v.stopped_at.as_ref().unwrap().reason,
            "is not a GPU index, a GPU- UUID or a MIG- id"
        );
        let v = resolve(&parse(Some("GPU-0000-x")), &p);
        assert_eq!(
            v.stopped_at.as_ref().unwrap().reason,
            "is not a valid GPU UUID"
        );
        let v = resolve(
            &parse(Some("GPU-0000aaaa-0000-0000-0000-000000000000,GPU-1111")),
            &p,
        );
        assert_eq!(ords(&v), vec![Some(0)]);
        assert_eq!(
            v.stopped_at.as_ref().unwrap().reason,
            "is ambiguous: it begins the UUIDs of 2 GPUs (physical GPU 1, physical GPU 2)"
        );
        let v = resolve(&parse(Some("GPU-1111B,GPU-9")), &p);
        assert_eq!(ords(&v), vec![Some(2)]);
        assert_eq!(
            v.stopped_at.as_ref().unwrap().reason,
            "matches no GPU's UUID"
        );
        assert_eq!(v.ordinals[0].entry.as_deref(), Some("GPU-1111B"));
    }

    #[test]
    fn duplicates_stop() {
        let p = phys(2);
        let v = resolve(&parse(Some("1,GPU-1111,0")), &p);
        assert_eq!(ords(&v), vec![Some(1)]);
        assert_eq!(
            v.stopped_at.as_ref().unwrap().reason,
            "repeats physical GPU 1 (already ordinal 0)"
        );
        let v = resolve(&parse(Some("MIG-ab12,MIG-AB12")), &p);
        assert_eq!(ords(&v), vec![None]);
        assert_eq!(v.stopped_at.as_ref().unwrap().reason, "repeats ordinal 0");
        assert_eq!(
            describe(&resolve(&parse(Some("MIG-ab12")), &p)),
            "CUDA_VISIBLE_DEVICES=MIG-ab12 made MIG-ab12 ordinal 0"
        );
    }

    #[test]
    fn by_count() {
        let spec = parse(Some("1,GPU-ab,5,0"));
        let v = resolve_by_count(&spec, 2);
        assert_eq!(ords(&v), vec![Some(1), None]);
        assert_eq!(v.physical_count, None);
        assert_eq!(
            v.stopped_at,
            Some(Stop {
                position: 3,
                entry: "5".into(),
                reason: "was rejected by the driver (no GPU has index 5 here)".into()
            })
        );
        let v = resolve_by_count(&parse(Some("1,1")), 1);
        assert_eq!(v.stopped_at.unwrap().reason, "repeats ordinal 0");
        let v = resolve_by_count(&parse(Some("1,x")), 1);
        assert_eq!(
            v.stopped_at.unwrap().reason,
            "is not a GPU index, a GPU- UUID or a MIG- id"
        );
        let v = resolve_by_count(&parse(None), 2);
        assert_eq!(ords(&v), vec![Some(0), Some(1)]);
        // The driver accepted more than the syntax model allows: trust the driver.
        let v = resolve_by_count(&parse(Some("x")), 1);
        assert_eq!(ords(&v), vec![None]);
        assert_eq!(v.stopped_at, None);
    }
}
