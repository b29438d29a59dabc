//! Whether a failed request for a device is a mistake to repair or a question to leave to
//! the driver, decided once per ordinal for the whole process.
//!
//! In `fix` mode a request for a device the process cannot have goes to another device
//! ([`crate::fallback`]). That is right for a program that asks for one device it was told
//! to use (a rank, a configuration value, a hard-coded `cuda:N`: ordinal 1 with
//! `CUDA_VISIBLE_DEVICES=1`, ordinal 6 on a 1-GPU host, rank 1 in a 1-GPU container, also
//! after the program asked `cuDeviceGetCount`), and wrong for a program that asks to learn
//! how many devices there are: `while (cuDeviceGet(&d, n) == CUDA_SUCCESS) n++;` would never
//! stop. [`classify`] decides from plain facts (the value, the device count, and this
//! thread's previous device look-up); a question gets the driver's answer untouched and no
//! stderr line, and is only counted. [`Decisions`] keeps the first verdict for each ordinal:
//! every later request for that ordinal, on any thread and through any entry point, gets the
//! same answer (a program that asks twice must not learn two things).
//!
//! The rules, in order:
//!
//! 1. a negative value is a question ([`Question::Negative`]): no rank, configuration or
//!    device string names a negative device;
//! 2. a value of [`MAX_DEVICES`] or more is a question ([`Question::AboveMaxDevices`]): no
//!    driver can report such a device, so no program was told to use it;
//! 3. for `cuDeviceGet`, the entry point programs enumerate with:
//!    - the ordinal after one the driver found, when it is at least the device count, or
//!      the ordinal after one that was already such a question, or after a mistaken one
//!      when it is at least the device count ([`Question::PastLastDevice`]: the ascending
//!      probe that runs one past the last device, and keeps going; probing from 1 upwards
//!      stops after the first look-up). A context made on a device in between starts a new
//!      history ([`Last::Nothing`]): a program that uses each device it looks up walks its
//!      list of devices, and `6, 7` on a 1-GPU host are then two mistakes;
//!    - the ordinal below one that failed just before ([`Question::Descending`]: the
//!      descending probe `for (i = 7; i >= 0; i--)`; its first look-up cannot be told from
//!      a rank and is a mistake, the rest are questions, so it gets one explanation);
//! 4. anything else is a mistake, the count itself right after `cuDeviceGetCount` included
//!    (`cuDeviceGet(&d, count)` is the shape of the rank mistake: a program checked the
//!    count, then used its rank; a negative test that wants the error sets
//!    `SEEDANCE_FALLBACK=off`). So is a lone first look-up of ordinal 1 on a 1-GPU host ("is
//!    there a second GPU?" asked that way is the rank mistake's shape; asked after ordinal 0
//!    was found, it is a question and gets the driver's no).
//!
//! A question that `CUDA_VISIBLE_DEVICES` explains (the ordinal is the physical index of a
//! device the variable renumbered: ordinal 1 with `CUDA_VISIBLE_DEVICES=1`) becomes
//! [`Verdict::Explained`]: still the driver's answer, never repaired, but explained once,
//! because that variable is the most common cause of the mistake.

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
    /// The next ordinal of an ascending enumeration, past the last device.
    PastLastDevice,
    /// The next ordinal of a descending enumeration (one below an ordinal that failed).
    Descending,
}

impl Question {
    /// Every kind, in [`Question::index`] order.
    pub const ALL: [Question; 4] = [
        Question::Negative,
        Question::AboveMaxDevices,
        Question::PastLastDevice,
        Question::Descending,
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
            Question::PastLastDevice => "past_last_device",
            Question::Descending => "descending_probe",
        }
    }

    /// Whether the question comes from the shape of an enumeration (the history) rather
    /// than from the value alone: only those can be a renumbered physical index.
    pub fn from_enumeration(self) -> bool {
        matches!(self, Question::PastLastDevice | Question::Descending)
    }
}

/// What a failed device request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// One device asked for by mistake: explain, and in `fix` mode repair.
    Mistake,
    /// A question: the driver's answer, untouched, no stderr; counted.
    Question(Question),
    /// A question whose ordinal `CUDA_VISIBLE_DEVICES` renumbered: the driver's answer,
    /// untouched and never repaired, but explained once; counted as a question.
    Explained(Question),
}

impl Verdict {
    /// The history after a `cuDeviceGet(requested)` that got this verdict.
    pub fn then(self, requested: i32) -> Last {
        match self {
            Verdict::Mistake => Last::Mistaken(requested),
            Verdict::Question(_) | Verdict::Explained(_) => Last::Asked(requested),
        }
    }

    /// The question, for a verdict that keeps the driver's answer.
    pub fn question(self) -> Option<Question> {
        match self {
            Verdict::Mistake => None,
            Verdict::Question(q) | Verdict::Explained(q) => Some(q),
        }
    }
}

/// Classifies a failed request for device `requested` (an ordinal, or the ordinal of a
/// handle, or the handle's value when it is no device's) made through `entry`, with the
/// driver's device count (`None` when unknown) and this thread's previous look-up `last`.
/// `renumbered`: `CUDA_VISIBLE_DEVICES` made the physical device `requested` some other
/// ordinal (then a question from the enumeration's shape is [`Verdict::Explained`]).
pub fn classify(
    entry: Entry,
    requested: i32,
    count: Option<i32>,
    last: Last,
    renumbered: bool,
) -> Verdict {
    if requested < 0 {
        return Verdict::Question(Question::Negative);
    }
    if requested >= MAX_DEVICES {
        return Verdict::Question(Question::AboveMaxDevices);
    }
    if entry != Entry::Lookup {
        return Verdict::Mistake;
    }
    let past_end = count.is_none_or(|n| requested >= n);
    let next = |o: i32| o.checked_add(1) == Some(requested);
    let below = |o: i32| o.checked_sub(1) == Some(requested);
    let q = match last {
        Last::Found(o) if next(o) && past_end => Some(Question::PastLastDevice),
        Last::Asked(o) if next(o) => Some(Question::PastLastDevice),
        Last::Mistaken(o) if next(o) && past_end => Some(Question::PastLastDevice),
        Last::Asked(o) | Last::Mistaken(o) if below(o) => Some(Question::Descending),
        _ => None,
    };
    match q {
        Some(q) if renumbered => Verdict::Explained(q),
        Some(q) => Verdict::Question(q),
        None => Verdict::Mistake,
    }
}

/// The process's verdicts, by requested ordinal: the first verdict for an ordinal is the
/// answer to every later failed request for it, on every thread and entry point. Consulted
/// only after a failure, so the lock is off the success path.
#[derive(Default)]
pub struct Decisions {
    made: parking_lot::Mutex<std::collections::BTreeMap<i32, Verdict>>,
}

impl Decisions {
    /// No verdict yet.
    pub fn new() -> Decisions {
        Decisions::default()
    }

    /// The verdict already made for `requested`, or `verdict` (this request's own
    /// classification), which is then kept. The second value is `true` when this call made
    /// the decision.
    pub fn decide(&self, requested: i32, verdict: Verdict) -> (Verdict, bool) {
        let mut made = self.made.lock();
        match made.get(&requested) {
            Some(&v) => (v, false),
            None => {
                made.insert(requested, verdict);
                (verdict, true)
            }
        }
    }

    /// The verdict kept for `requested`, if one was made.
    pub fn get(&self, requested: i32) -> Option<Verdict> {
        self.made.lock().get(&requested).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const Q: fn(Question) -> Verdict = Verdict::Question;

    fn c(entry: Entry, requested: i32, count: Option<i32>, last: Last) -> Verdict {
        classify(entry, requested, count, last, false)
    }

    #[test]
    fn the_mistakes_of_the_public_reports_are_repaired() {
        // Ordinal 1 with CUDA_VISIBLE_DEVICES=1 (1 device), first look-up of the thread.
        assert_eq!(
            c(Entry::Lookup, 1, Some(1), Last::Nothing),
            Verdict::Mistake
        );
        // The count right after the count: rank 1 on a 1-GPU host that checked the count.
        assert_eq!(
            c(Entry::Lookup, 1, Some(1), Last::Count(1)),
            Verdict::Mistake
        );
        assert_eq!(
            classify(Entry::Lookup, 1, Some(1), Last::Count(1), true),
            Verdict::Mistake
        );
        assert_eq!(
            c(Entry::Lookup, 2, Some(2), Last::Count(2)),
            Verdict::Mistake
        );
        // Ordinal 6 on a 1-GPU host.
        assert_eq!(
            c(Entry::Lookup, 6, Some(1), Last::Nothing),
            Verdict::Mistake
        );
        // Rank 1 in a 1-GPU container through cudaSetDevice, after the runtime enumerated.
        assert_eq!(c(Entry::Use, 1, Some(1), Last::Found(0)), Verdict::Mistake);
        assert_eq!(c(Entry::Use, 1, Some(1), Last::Count(1)), Verdict::Mistake);
        // A context on a handle that is no device's, but a plausible ordinal.
        assert_eq!(c(Entry::Use, 5, Some(2), Last::Nothing), Verdict::Mistake);
        // The last ordinal a driver can report.
        assert_eq!(
            c(Entry::Lookup, 31, Some(8), Last::Nothing),
            Verdict::Mistake
        );
    }

    #[test]
    fn questions_get_the_drivers_answer() {
        for entry in [Entry::Lookup, Entry::Use] {
            assert_eq!(c(entry, -1, Some(2), Last::Nothing), Q(Question::Negative));
            assert_eq!(
                c(entry, i32::MIN, Some(2), Last::Nothing),
                Q(Question::Negative)
            );
            assert_eq!(
                c(entry, 32, Some(2), Last::Nothing),
                Q(Question::AboveMaxDevices)
            );
            assert_eq!(
                c(entry, 12345, None, Last::Nothing),
                Q(Question::AboveMaxDevices)
            );
            assert_eq!(
                c(entry, i32::MAX, Some(2), Last::Asked(i32::MAX - 1)),
                Q(Question::AboveMaxDevices)
            );
        }
        // The probing loop on 2 devices: 0 and 1 found, 2 is the question, and a loop that
        // keeps going (for i < 64) keeps asking.
        assert_eq!(
            c(Entry::Lookup, 2, Some(2), Last::Found(1)),
            Q(Question::PastLastDevice)
        );
        assert_eq!(
            c(Entry::Lookup, 3, Some(2), Last::Asked(2)),
            Q(Question::PastLastDevice)
        );
        assert_eq!(
            c(Entry::Lookup, 2, None, Last::Found(1)),
            Q(Question::PastLastDevice)
        );
        // Probing from 1 upwards on 1 device: 1 is the mistake's shape, 2 is the probe.
        assert_eq!(
            c(Entry::Lookup, 2, Some(1), Last::Mistaken(1)),
            Q(Question::PastLastDevice)
        );
        // The descending probe from 7 on 1 device: 7 a mistake, then 6..1 questions.
        assert_eq!(
            c(Entry::Lookup, 7, Some(1), Last::Nothing),
            Verdict::Mistake
        );
        assert_eq!(
            c(Entry::Lookup, 6, Some(1), Last::Mistaken(7)),
            Q(Question::Descending)
        );
        assert_eq!(
            c(Entry::Lookup, 5, Some(1), Last::Asked(6)),
            Q(Question::Descending)
        );
        // "Is there a second GPU?" after ordinal 0 was found.
        assert_eq!(
            c(Entry::Lookup, 1, Some(1), Last::Found(0)),
            Q(Question::PastLastDevice)
        );
    }

    #[test]
    fn a_renumbered_ordinal_is_never_silent() {
        assert_eq!(
            classify(Entry::Lookup, 1, Some(1), Last::Found(0), true),
            Verdict::Explained(Question::PastLastDevice)
        );
        assert_eq!(
            classify(Entry::Lookup, 1, Some(1), Last::Mistaken(2), true),
            Verdict::Explained(Question::Descending)
        );
        assert_eq!(
            classify(Entry::Lookup, 1, Some(1), Last::Nothing, true),
            Verdict::Mistake
        );
        // The value rules stand: no physical index is negative or 32 and more.
        assert_eq!(
            classify(Entry::Lookup, -1, Some(1), Last::Nothing, true),
            Q(Question::Negative)
        );
        assert_eq!(
            Verdict::Explained(Question::Descending).then(3),
            Last::Asked(3)
        );
        assert_eq!(
            Verdict::Explained(Question::Descending).question(),
            Some(Question::Descending)
        );
        assert_eq!(Verdict::Mistake.question(), None);
    }

    #[test]
    fn only_the_next_ordinal_continues_an_enumeration() {
        // A jump is a mistake; so is an ordinal after one found below the count (the
        // driver would have answered it: a failure there is not an enumeration's end).
        assert_eq!(
            c(Entry::Lookup, 3, Some(2), Last::Found(1)),
            Verdict::Mistake
        );
        assert_eq!(
            c(Entry::Lookup, 1, Some(4), Last::Found(0)),
            Verdict::Mistake
        );
        assert_eq!(
            c(Entry::Lookup, 3, Some(2), Last::Count(2)),
            Verdict::Mistake
        );
        assert_eq!(c(Entry::Use, 2, Some(2), Last::Found(1)), Verdict::Mistake);
        // A jump after a mistake stays a mistake: 6, then 1 on a 1-GPU host.
        assert_eq!(
            c(Entry::Lookup, 1, Some(1), Last::Mistaken(6)),
            Verdict::Mistake
        );
        assert_eq!(Verdict::Mistake.then(6), Last::Mistaken(6));
        assert_eq!(Q(Question::Negative).then(-1), Last::Asked(-1));
    }

    #[test]
    fn the_first_decision_is_kept() {
        let d = Decisions::new();
        assert_eq!(d.decide(1, Verdict::Mistake), (Verdict::Mistake, true));
        // The same ordinal later classified as a question (after a count, on another
        // thread) keeps the first answer.
        assert_eq!(
            d.decide(1, Q(Question::PastLastDevice)),
            (Verdict::Mistake, false)
        );
        assert_eq!(
            d.decide(2, Q(Question::PastLastDevice)),
            (Q(Question::PastLastDevice), true)
        );
        assert_eq!(
            d.decide(2, Verdict::Mistake),
            (Q(Question::PastLastDevice), false)
        );
        assert_eq!(d.get(1), Some(Verdict::Mistake));
        assert_eq!(d.get(3), None);
    }

    #[test]
    fn names() {
        for (i, q) in Question::ALL.iter().enumerate() {
            assert_eq!(q.index(), i);
        }
        assert_eq!(Question::Negative.as_str(), "negative");
        assert_eq!(Question::AboveMaxDevices.as_str(), "above_max_devices");
        assert_eq!(Question::PastLastDevice.as_str(), "past_last_device");
        assert_eq!(Question::Descending.as_str(), "descending_probe");
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
            renumbered in any::<bool>(),
        ) {
            for entry in [Entry::Lookup, Entry::Use] {
                let v = classify(entry, requested, count, Last::Nothing, renumbered);
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
                c(Entry::Use, requested, count, last),
                c(Entry::Use, requested, count, Last::Nothing)
            );
        }

        #[test]
        fn a_renumbered_ordinal_is_never_a_silent_question(
            requested in 0i32..MAX_DEVICES,
            count in proptest::option::of(0i32..=32),
            last in any_last(),
        ) {
            let v = classify(Entry::Lookup, requested, count, last, true);
            prop_assert!(!matches!(v, Verdict::Question(_)), "{:?}", v);
        }
    }
}
