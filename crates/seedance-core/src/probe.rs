//! Whether a failed request for a device is a mistake to repair or a question to leave to
//! the driver.
//!
//! In `fix` mode a request for a device the process cannot have goes to another device
//! ([`crate::fallback`]). That is right for a program that asks for one device it was told
//! to use (a rank, a configuration value, a hard-coded `cuda:N`: ordinal 1 with
//! `CUDA_VISIBLE_DEVICES=1`, ordinal 6 on a 1-GPU host, rank 1 in a 1-GPU container), and
//! wrong for a program that asks to learn how many devices there are, or that checks an
//! error path on purpose: `while (cuDeviceGet(&d, n) == CUDA_SUCCESS) n++;` would never stop,
//! and a negative test would pass a value it knows is wrong. [`classify`] decides from plain
//! facts (the value, the device count, and this thread's previous device look-up); a
//! question gets the driver's answer untouched and no stderr line, and is only counted.
//!
//! The rules, in order:
//!
//! 1. a negative value is a question ([`Question::Negative`]): no rank, configuration or
//!    device string names a negative device;
//! 2. a value of [`MAX_DEVICES`] or more is a question ([`Question::AboveMaxDevices`]): no
//!    driver can report such a device, so no program was told to use it;
//! 3. for `cuDeviceGet`, the entry point programs enumerate with:
//!    - the count itself right after `cuDeviceGetCount` answered that count
//!      ([`Question::DeviceCount`]: the negative test `cuDeviceGet(&d, count)`);
//!    - the ordinal after one the driver found, when it is at least the device count, or
//!      the ordinal after one that was already such a question ([`Question::PastLastDevice`]:
//!      the ascending probe that runs one past the last device, and keeps going);
//! 4. anything else is a mistake. An ordinal after one that was itself taken as a mistake
//!    stays a mistake (`6, 7` on a 1-GPU host is an 8-GPU program's device list, not a probe).

/// Most GPUs one system can have: `NV_MAX_DEVICES`, 32, "the maximum number of GPUs
/// supported in a single system" (NVIDIA open-gpu-kernel-modules,
/// `src/common/sdk/nvidia/inc/nvlimits.h`). Ordinals run from 0 to 31, so an ordinal of 32
/// or more is one no driver can report.
pub const MAX_DEVICES: i32 = 32;

/// How the call names its device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// `cuDeviceGet`: looks an ordinal up; what a program enumerates devices with.
    Lookup,
    /// A call that uses a device (`cudaSetDevice`, `cuDevicePrimaryCtxRetain`,
    /// `cuCtxCreate`): only the value rules (negative, above [`MAX_DEVICES`]) apply.
    Use,
}

/// This thread's previous device look-up (`cuDeviceGet` or `cuDeviceGetCount`), the history
/// [`classify`] needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Last {
    /// None yet.
    #[default]
    Nothing,
    /// `cuDeviceGetCount` answered this count.
    Count(i32),
    /// `cuDeviceGet` found this ordinal (the driver's success).
    Found(i32),
    /// `cuDeviceGet` of this ordinal failed and was taken as a question.
    Asked(i32),
    /// `cuDeviceGet` of this ordinal failed and was taken as a mistake.
    Mistaken(i32),
}

impl Last {
    /// Packs the history into one word, for a thread-local cell.
    pub fn to_bits(self) -> u64 {
        let (tag, v) = match self {
            Last::Nothing => (0u64, 0i32),
            Last::Count(n) => (1, n),
            Last::Found(o) => (2, o),
            Last::Asked(o) => (3, o),
            Last::Mistaken(o) => (4, o),
        };
        (tag << 32) | u64::from(v as u32)
    }

    /// The inverse of [`Last::to_bits`]; an unknown word is [`Last::Nothing`].
    pub fn from_bits(bits: u64) -> Last {
        let v = bits as u32 as i32;
        match bits >> 32 {
            1 => Last::Count(v),
            2 => Last::Found(v),
            3 => Last::Asked(v),
            4 => Last::Mistaken(v),
            _ => Last::Nothing,
        }
    }
}

/// Why a failed request is a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Question {
    /// A negative ordinal or handle.
    Negative,
    /// [`MAX_DEVICES`] or more.
    AboveMaxDevices,
    /// `cuDeviceGet(count)` right after `cuDeviceGetCount` answered `count`.
    DeviceCount,
    /// The next ordinal of an ascending enumeration, past the last device.
    PastLastDevice,
}

impl Question {
    /// Every kind, in [`Question::index`] order.
    pub const ALL: [Question; 4] = [
        Question::Negative,
        Question::AboveMaxDevices,
        Question::DeviceCount,
        Question::PastLastDevice,
    ];

    /// The position of this kind in [`Question::ALL`], for a table of counters.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The name used in the trace (`exit_summary.device_questions`).
    pub fn as_str(self) -> &'static str {
        match self {
            Question::Negative => "negative",
            Question::AboveMaxDevices => "above_max_devices",
            Question::DeviceCount => "device_count",
            Question::PastLastDevice => "past_last_device",
        }
    }
}

/// What a failed device request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// One device asked for by mistake: explain, and in `fix` mode repair.
    Mistake,
    /// A question: the driver's answer, untouched, no stderr; counted.
    Question(Question),
}

impl Verdict {
    /// The history after a `cuDeviceGet(requested)` that got this verdict.
    pub fn then(self, requested: i32) -> Last {
        match self {
            Verdict::Mistake => Last::Mistaken(requested),
            Verdict::Question(_) => Last::Asked(requested),
        }
    }
}

/// Classifies a failed request for device `requested` (an ordinal, or the ordinal of a
/// handle, or the handle's value when it is no device's) made through `entry`, with the
/// driver's device count (`None` when unknown) and this thread's previous look-up `last`.
pub fn classify(entry: Entry, requested: i32, count: Option<i32>, last: Last) -> Verdict {
    if requested < 0 {
        return Verdict::Question(Question::Negative);
    }
    if requested >= MAX_DEVICES {
        return Verdict::Question(Question::AboveMaxDevices);
    }
    if entry == Entry::Lookup {
        let past_end = count.is_none_or(|n| requested >= n);
        match last {
            Last::Count(n) if requested == n => return Verdict::Question(Question::DeviceCount),
            Last::Found(o) if o.checked_add(1) == Some(requested) && past_end => {
                return Verdict::Question(Question::PastLastDevice)
            }
            Last::Asked(o) if o.checked_add(1) == Some(requested) => {
                return Verdict::Question(Question::PastLastDevice)
            }
            _ => {}
        }
    }
    Verdict::Mistake
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const Q: fn(Question) -> Verdict = Verdict::Question;

    #[test]
    fn the_mistakes_of_the_public_reports_are_repaired() {
        // Ordinal 1 with CUDA_VISIBLE_DEVICES=1 (1 device), first look-up of the thread.
        assert_eq!(
            classify(Entry::Lookup, 1, Some(1), Last::Nothing),
            Verdict::Mistake
        );
        // Ordinal 6 on a 1-GPU host; then 7 after the repaired 6.
        assert_eq!(
            classify(Entry::Lookup, 6, Some(1), Last::Nothing),
            Verdict::Mistake
        );
        assert_eq!(
            classify(Entry::Lookup, 7, Some(1), Last::Mistaken(6)),
            Verdict::Mistake
        );
        // Rank 1 in a 1-GPU container through cudaSetDevice, after the runtime enumerated.
        assert_eq!(
            classify(Entry::Use, 1, Some(1), Last::Found(0)),
            Verdict::Mistake
        );
        assert_eq!(
            classify(Entry::Use, 1, Some(1), Last::Count(1)),
            Verdict::Mistake
        );
        // A context on a handle that is no device's, but a plausible ordinal.
        assert_eq!(
            classify(Entry::Use, 5, Some(2), Last::Nothing),
            Verdict::Mistake
        );
        // The last ordinal a driver can report.
        assert_eq!(
            classify(Entry::Lookup, 31, Some(8), Last::Nothing),
            Verdict::Mistake
        );
    }

    #[test]
    fn questions_get_the_drivers_answer() {
        for entry in [Entry::Lookup, Entry::Use] {
            assert_eq!(
                classify(entry, -1, Some(2), Last::Nothing),
                Q(Question::Negative)
            );
            assert_eq!(
                classify(entry, i32::MIN, Some(2), Last::Nothing),
                Q(Question::Negative)
            );
            assert_eq!(
                classify(entry, 32, Some(2), Last::Nothing),
                Q(Question::AboveMaxDevices)
            );
            assert_eq!(
                classify(entry, 12345, None, Last::Nothing),
                Q(Question::AboveMaxDevices)
            );
            assert_eq!(
                classify(entry, i32::MAX, Some(2), Last::Asked(i32::MAX - 1)),
                Q(Question::AboveMaxDevices)
            );
        }
        // The probing loop on 2 devices: 0 and 1 found, 2 is the question, and a loop that
        // keeps going (for i < 64) keeps asking.
        assert_eq!(
            classify(Entry::Lookup, 2, Some(2), Last::Found(1)),
            Q(Question::PastLastDevice)
        );
        assert_eq!(
            classify(Entry::Lookup, 3, Some(2), Last::Asked(2)),
            Q(Question::PastLastDevice)
        );
        assert_eq!(
            classify(Entry::Lookup, 2, None, Last::Found(1)),
            Q(Question::PastLastDevice)
        );
        // The negative test cuDeviceGet(&d, count) after cuDeviceGetCount.
        assert_eq!(
            classify(Entry::Lookup, 2, Some(2), Last::Count(2)),
            Q(Question::DeviceCount)
        );
    }

    #[test]
    fn only_the_next_ordinal_continues_an_enumeration() {
        // A jump is a mistake; so is an ordinal after one found below the count (the
        // driver would have answered it: a failure there is not an enumeration's end).
        assert_eq!(
            classify(Entry::Lookup, 3, Some(2), Last::Found(1)),
            Verdict::Mistake
        );
        assert_eq!(
            classify(Entry::Lookup, 1, Some(4), Last::Found(0)),
            Verdict::Mistake
        );
        assert_eq!(
            classify(Entry::Lookup, 3, Some(2), Last::Count(2)),
            Verdict::Mistake
        );
        assert_eq!(
            classify(Entry::Use, 2, Some(2), Last::Found(1)),
            Verdict::Mistake
        );
        assert_eq!(Verdict::Mistake.then(6), Last::Mistaken(6));
        assert_eq!(Q(Question::Negative).then(-1), Last::Asked(-1));
    }

    #[test]
    fn names() {
        for (i, q) in Question::ALL.iter().enumerate() {
            assert_eq!(q.index(), i);
        }
        assert_eq!(Question::Negative.as_str(), "negative");
        assert_eq!(Question::AboveMaxDevices.as_str(), "above_max_devices");
        assert_eq!(Question::DeviceCount.as_str(), "device_count");
        assert_eq!(Question::PastLastDevice.as_str(), "past_last_device");
    }

    fn any_last() -> impl Strategy<Value = Last> {
        prop_oneof![
            Just(Last::Nothing),
            any::<i32>().prop_map(Last::Count),
            any::<i32>().prop_map(Last::Found),
            any::<i32>().prop_map(Last::Asked),
            any::<i32>().prop_map(Last::Mistaken),
        ]
    }

    proptest! {
        #[test]
        fn history_round_trips(last in any_last()) {
            prop_assert_eq!(Last::from_bits(last.to_bits()), last);
        }

        #[test]
        fn a_first_request_in_range_is_a_mistake_and_out_of_range_a_question(
            requested in any::<i32>(),
            count in proptest::option::of(0i32..=32),
        ) {
            for entry in [Entry::Lookup, Entry::Use] {
                let v = classify(entry, requested, count, Last::Nothing);
                prop_assert_eq!(v == Verdict::Mistake, (0..MAX_DEVICES).contains(&requested));
            }
        }

        #[test]
        fn a_use_is_judged_by_its_value_alone(
            requested in any::<i32>(),
            count in proptest::option::of(0i32..=32),
            last in any_last(),
        ) {
            prop_assert_eq!(
                classify(Entry::Use, requested, count, last),
                classify(Entry::Use, requested, count, Last::Nothing)
            );
        }
    }
}
