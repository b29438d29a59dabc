//! Unit tests of the tracker and its explanations.

use super::*;
use seedance_hotpath::work::{stream_key, CopyKind};

/// A synchronize of `event` among `shards` (what [`seedance_hotpath::work::retire_event`] does over
/// every registered shard): its latest record's counts taken as synchronised.
fn retire_event_among(shards: &[&Shard], event: u64) {
    if let Some((m, s)) = seedance_hotpath::work::latest_event_mark(shards.iter().copied(), event) {
        s.raise(m.key, m.counts);
    }
}

fn site(t: &mut Tracker, f: &'static str) -> Site {
    t.site(f, 100, 1)
}

#[test]
fn contexts_primary_generations_and_ends() {
    let mut t = Tracker::new();
    let s = site(&mut t, "cuCtxCreate_v2");
    assert_eq!(s.seq, 1);
    let a = t.context_created(0x1000, Some(0), s).unwrap();
    let s = site(&mut t, "cuDevicePrimaryCtxRetain");
    let p = t.primary_retained(0x2000, Some(1), s).unwrap();
    let s = site(&mut t, "cuDevicePrimaryCtxRetain");
    assert_eq!(t.primary_retained(0x2000, Some(1), s), Some(p));
    assert_eq!(t.context(p).unwrap().retained, 2);
    assert_eq!(t.live_primary(1).map(|c| c.id), Some(p));
    t.primary_released(p);
    assert_eq!(t.context(p).unwrap().retained, 1);
    let s = site(&mut t, "cuStreamCreate");
    t.stream_created(0x5000, Some(p), s);
    let s = site(&mut t, "cuEventCreate");
    t.event_created(0x6000, Some(p), s);
    let created = site(&mut t, "cuMemHostAlloc");
    t.pinned_added(Pinned {
        lo: 0x9000,
        bytes: 4096,
        kind: PinnedKind::Allocated,
        ctx: Some(p),
        created,
    });
    let end = site(&mut t, "cuDevicePrimaryCtxReset_v2");
    t.context_ended(
        p,
        EndKind::Reset,
        end.clone(),
        Counts::default(),
        &[(0x7000, 512)],
    );
    assert!(t.live_context(0x2000).is_none());
    assert_eq!(t.ended(t.stream(0x5000).unwrap().ctx).unwrap().id, p);
    assert_eq!(t.ended(t.event(0x6000).unwrap().ctx).unwrap().id, p);
    assert_eq!(
        t.dead_device(0x7000),
        Some(&DeadMemory { bytes: 512, ctx: p })
    );
    assert!(t.pinned(0x9000).is_none());
    assert_eq!(t.dead_pinned(0x9000).map(|d| d.ctx), Some(p));
    // The primary context comes back at the same handle: a new incarnation.
    let s = site(&mut t, "cuDevicePrimaryCtxRetain");
    let p2 = t.primary_retained(0x2000, Some(1), s).unwrap();
    assert_ne!(p, p2);
    assert_eq!(t.context(p2).unwrap().generation, 2);
    assert_eq!(t.latest_context(0x2000).unwrap().id, p2);
    // The old stream is still recognised as dead.
    assert!(t.ended(t.stream(0x5000).unwrap().ctx).is_some());
    assert_eq!(t.live_contexts().len(), 2);
    assert_eq!(t.context(a).unwrap().generation, 1);
    // Handing the address out again forgets the dead allocation.
    assert!(t.forget_dead_device(0x7000).is_some());
    assert!(t.dead_device(0x7000).is_none());
    let e = t.context(p).unwrap().end.clone().unwrap();
    assert_eq!(e.site, end);
}

#[test]
fn pending_work_and_baselines() {
    let mut t = Tracker::new();
    let s = site(&mut t, "cuCtxCreate_v2");
    let c = t.context_created(0x1000, Some(0), s).unwrap();
    let s = site(&mut t, "cuStreamCreate");
    t.stream_created(0x5000, Some(c), s);
    let a = Box::new(Shard::new(0));
    let b = Box::new(Shard::new(1));
    let legacy = stream_key(0, 0x1000, false);
    a.add_launch(0x5000);
    a.add_copy(0x5000, 0x7000, 0x9000, 64, CopyKind::HostToDevice);
    b.add_launch(0x5000);
    b.add_launch(legacy);
    let shards: [&Shard; 2] = [&a, &b];
    let mine = |k: u64| t.key_owner(k) == Some(c);
    let p = t.pending(&shards, mine);
    assert_eq!(p.len(), 2);
    let s = p.iter().find(|p| p.key == 0x5000).unwrap();
    assert_eq!(
        s.counts,
        Counts {
            launches: 2,
            copies: 1,
            ops: 0
        }
    );
    assert_eq!(s.shards, vec![0, 1]);
    assert_eq!(s.copies.len(), 1);
    assert!(s.copies[0].touches_host(0x9020, 0x9021));
    // Synchronising the stream retires it; the default stream stays pending.
    t.retire(&shards, |k| k == 0x5000);
    let p = t.pending(&shards, |k| t.key_owner(k) == Some(c));
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].key, legacy);
    b.add_launch(legacy);
    t.retire_context(&shards, c);
    assert!(t.pending(&shards, |k| t.key_owner(k) == Some(c)).is_empty());
    b.add_launch(legacy);
    // New work after the baseline is pending again.
    a.add_copy(0x5000, 0x7000, 0x9000, 8, CopyKind::HostToDevice);
    let p = t.pending(&shards, |k| k == 0x5000);
    assert_eq!(
        p[0].counts,
        Counts {
            launches: 0,
            copies: 1,
            ops: 0
        }
    );
    assert_eq!(p[0].copies.len(), 1);
    assert_eq!(p[0].copies[0].bytes, 8);
    // An event recorded after the copy retires it when synchronised.
    a.add_event_record(0xe0, 0x5000);
    a.add_launch(0x5000);
    retire_event_among(&shards, 0xe0);
    let p = t.pending(&shards, |k| k == 0x5000);
    assert_eq!(
        p[0].counts,
        Counts {
            launches: 1,
            copies: 0,
            ops: 0
        }
    );
    // Retiring one shard's per-thread stream.
    b.retire(legacy);
    assert!(t.pending(&shards, |k| k == legacy).is_empty());
}

#[test]
fn orphans_follow_their_context() {
    let mut t = Tracker::new();
    let rec = CopyRecord {
        key: 0x5000,
        ordinal: 1,
        dst: 0x7000,
        src: 0x9000,
        bytes: 16,
        kind: CopyKind::HostToDevice,
    };
    t.orphan(3, &[rec]);
    assert_eq!(t.orphans_touching_host(0x9000, 0x9001).len(), 1);
    assert!(t.orphans_touching_host(0x7000, 0x7010).is_empty());
    t.context_synchronized(3);
    assert!(t.orphans_touching_host(0x9000, 0x9001).is_empty());
}

#[test]
fn explanations() {
    let mut t = Tracker::new();
    let s = site(&mut t, "cuCtxCreate_v2");
    let c = t.context_created(0x5eedc0000100, Some(0), s).unwrap();
    let s = site(&mut t, "cuStreamCreate");
    let work = vec![
        StreamWork {
            stream: Some(0x5eed50000100),
            per_thread: false,
            counts: Counts {
                launches: 1,
                copies: 2,
                ops: 0,
            },
            created: Some(s.clone()),
        },
        StreamWork {
            stream: None,
            per_thread: false,
            counts: Counts {
                launches: 3,
                copies: 0,
                ops: 0,
            },
            created: None,
        },
    ];
    let ctx = t.context(c).unwrap().clone();
    let text = explain_pending_at_end(EndKind::Destroyed, &ctx, &work, false);
    assert_eq!(
        text,
        "destroying context 0x5eedc0000100 (device 0, generation 1, made by cuCtxCreate_v2 on \
         thread 100 (lifetime call #1)) while its streams still have unfinished work (4 \
         launches and 2 copies submitted since they were last synchronised: stream \
         0x5eed50000100 (made by cuStreamCreate on thread 100 (lifetime call #2)): 1 launch \
         and 2 copies; the default stream: 3 launches); the work is abandoned: \
         its results are lost and later calls on these streams get \
         CUDA_ERROR_CONTEXT_IS_DESTROYED (709) or CUDA_ERROR_INVALID_HANDLE (400); \
         synchronise before tearing a context down (cuCtxSynchronize / \
         cudaDeviceSynchronize, or cuStreamSynchronize on each stream)"
    );
    assert!(
        explain_pending_at_end(EndKind::Reset, &ctx, &work, true).starts_with("resetting context")
    );
    let end = site(&mut t, "cuCtxDestroy_v2");
    t.context_ended(c, EndKind::Destroyed, end, work[0].counts, &[]);
    let ctx = t.context(c).unwrap().clone();
    let text = explain_dead_handle(HandleKind::Stream, 0x5eed50000100, Some(&s), &ctx, None);
    assert!(
        text.starts_with(
            "stream 0x5eed50000100, made by cuStreamCreate on thread 100 (lifetime call #2), \
         belonged to context 0x5eedc0000100 (device 0, generation 1, made by cuCtxCreate_v2 \
         on thread 100 (lifetime call #1)), which was destroyed by cuCtxDestroy_v2 on thread \
         100 (lifetime call #3) with 1 launch and 2 copies still unfinished (lost); the \
         driver released the stream with its context; release handles before"
        ),
        "{text}"
    );
    let text = explain_dead_handle(
        HandleKind::DeviceMemory,
        0x7000,
        None,
        &ctx,
        Some("returned CUDA_SUCCESS without calling the driver"),
    );
    assert!(text.contains("; fix: returned CUDA_SUCCESS without calling the driver; "));
    let text = explain_dead_handle(HandleKind::Context, 0x5eedc0000100, None, &ctx, None);
    assert!(text.starts_with("context 0x5eedc0000100 (device 0"));
    assert!(text.ends_with("retain or create a new one"));
    let p = Pinned {
        lo: 0x9000,
        bytes: 4096,
        kind: PinnedKind::Allocated,
        ctx: None,
        created: s,
    };
    let text = explain_pinned_in_use("freeing", (0x9000, 4096), Some(&p), &work[..1]);
    assert!(text.starts_with(
        "freeing pinned host memory 0x9000 (4.0 KiB (4096 bytes), made by cuStreamCreate"
    ));
    assert!(text
        .contains("returned while asynchronous copies that read or write it were still running"));
    assert!(text.contains("the copies may read freed or reused memory"));
    let waited = |ms| {
        explain_pinned_release_waited(
            "cuMemFreeHost",
            "freeing",
            (0x9000, 4096),
            Some(&p),
            &work[..1],
            std::time::Duration::from_millis(ms),
        )
    };
    let text = waited(1017);
    assert!(text.starts_with("freeing pinned host memory 0x9000 (4.0 KiB (4096 bytes), made by"));
    assert!(text.contains(": cuMemFreeHost waited 1.02 s for them before releasing the memory"));
    assert!(text.contains("the copies completed with the data intact"));
    assert!(!text.contains("corrupt"));
    assert!(waited(12).contains("waited 12.0 ms for them"));
    assert!(waited(0).contains("waited 0 us for them"));
    assert!(explain_device_in_use(0x7000, Some(512), &work[..1], false)
        .starts_with("freeing device memory 0x7000 (512 bytes) on one stream"));
}

#[test]
fn exit_line_is_only_for_work_still_queued_outside_the_runtime() {
    let mut t = Tracker::new();
    let s = site(&mut t, "cuDevicePrimaryCtxRetain");
    let p = t.primary_retained(0x2000, Some(0), s).unwrap();
    let mut f = ExitFindings {
        live: t.live_contexts().into_iter().cloned().collect(),
        leaks: vec![Leak {
            ctx: Some(p),
            host: false,
            allocations: 3,
            bytes: 3 << 20,
        }],
        unsynchronized: vec![(
            Some(p),
            StreamWork {
                stream: None,
                per_thread: false,
                counts: Counts {
                    launches: 5,
                    copies: 0,
                    ops: 0,
                },
                created: None,
            },
        )],
        after_deinit: BTreeMap::new(),
    };
    let lookup = |id: u32| t.context(id).cloned();
    assert_eq!(exit_line(&f, lookup), None);
    // Memory the driver could not attribute counts as the runtime's too, and so does
    // pinned memory allocated in the retained primary context (a caching allocator's).
    f.leaks.push(Leak {
        ctx: None,
        host: false,
        allocations: 1,
        bytes: 1,
    });
    f.leaks.push(Leak {
        ctx: Some(p),
        host: true,
        allocations: 2,
        bytes: 2 << 20,
    });
    assert_eq!(exit_line(&f, lookup), None);
    f.leaks.truncate(1);
    f.after_deinit.insert("cuMemFree_v2".into(), 2);
    let s = site(&mut t, "cuCtxCreate_v2");
    let c = t.context_created(0x1000, Some(1), s).unwrap();
    f.live = t.live_contexts().into_iter().cloned().collect();
    f.leaks.push(Leak {
        ctx: Some(c),
        host: false,
        allocations: 1,
        bytes: 4096,
    });
    let lookup = |id: u32| t.context(id).cloned();
    // A context never destroyed, its memory and calls after deinitialisation are left to
    // the driver at exit: the trace's, not stderr's.
    assert_eq!(exit_line(&f, lookup), None);
    f.unsynchronized.push((
        Some(c),
        StreamWork {
            stream: None,
            per_thread: false,
            counts: Counts {
                launches: 2,
                copies: 1,
                ops: 0,
            },
            created: None,
        },
    ));
    let text = exit_line(&f, lookup).unwrap();
    assert_eq!(
        text,
        format!(
            "at exit: work never synchronised ({}): it was still queued on the device when the \
             process exited, and nothing waited for its results. Synchronise the stream \
             (cuStreamSynchronize or cudaStreamSynchronize) before exit",
            f.unsynchronized[1].1.describe()
        )
    );
    assert_eq!(text.lines().count(), 1);
}

#[test]
fn describe_end_names_the_ending_call() {
    let mut t = Tracker::new();
    let s = t.site("cuCtxCreate_v2", 7, 1);
    let id = t.context_created(0x5eedc0000100, Some(0), s).unwrap();
    assert_eq!(describe_end(t.context(id).unwrap()), None);
    let s = t.site("cuCtxDestroy_v2", 8, 2);
    t.context_ended(id, EndKind::Destroyed, s, Counts::default(), &[]);
    assert_eq!(
        describe_end(t.context(id).unwrap()).unwrap(),
        "context 0x5eedc0000100 (device 0, generation 1, made by cuCtxCreate_v2 on thread 7 \
         (lifetime call #1)) was destroyed by cuCtxDestroy_v2 on thread 8 (lifetime call #2)"
    );
}

#[test]
fn other_operations_are_pending_work() {
    let mut t = Tracker::new();
    let s = site(&mut t, "cuCtxCreate_v2");
    let c = t.context_created(0x1000, Some(0), s).unwrap();
    let s = site(&mut t, "cuStreamCreate");
    t.stream_created(0x5000, Some(c), s);
    let a = Box::new(Shard::new(0));
    let shards: [&Shard; 1] = [&a];
    a.add_op(0x5000);
    a.add_launch(0x5000);
    a.add_op(0x5000);
    let p = t.pending(&shards, |k| t.key_owner(k) == Some(c));
    assert_eq!(
        p[0].counts,
        Counts {
            launches: 1,
            copies: 0,
            ops: 2
        }
    );
    t.retire(&shards, |k| k == 0x5000);
    assert!(t.pending(&shards, |k| k == 0x5000).is_empty());
    a.add_op(0x5000);
    assert_eq!(t.pending(&shards, |k| k == 0x5000)[0].counts.ops, 1);
    let one = |launches, copies, ops| {
        counted(Counts {
            launches,
            copies,
            ops,
        })
    };
    assert_eq!(
        one(0, 0, 1),
        "1 stream operation (a memset, graph launch or host function)"
    );
    assert_eq!(
        one(2, 1, 3),
        "2 launches, 1 copy and 3 stream operations (memsets, graph launches or host \
         functions)"
    );
    assert_eq!(one(1, 2, 0), "1 launch and 2 copies");
    assert_eq!(one(0, 0, 0), "no work");
}

#[test]
fn handles_that_ended_leave_the_tables() {
    let mut t = Tracker::new();
    let s = site(&mut t, "cuCtxCreate_v2");
    let c = t.context_created(0x1000, Some(0), s).unwrap();
    for i in 0..1_000_000u64 {
        let h = 0x5eed_0000_0000 + (i << 8);
        let s = site(&mut t, "cuStreamCreate");
        t.stream_created(h, Some(c), s);
        let s = site(&mut t, "cuEventCreate");
        t.event_created(h + 0x40, Some(c), s);
        assert_eq!(t.key_owner(h), Some(c));
        t.event_forgotten(h + 0x40);
        t.stream_forgotten(h);
    }
    assert_eq!(t.handles(), 0);
    // A stream still alive is kept.
    let s = site(&mut t, "cuStreamCreate");
    t.stream_created(0x7000, Some(c), s);
    assert_eq!(t.handles(), 2);
}

/// The baselines as they were kept before they moved into the shards: a map per (stream
/// key, shard id) in the tracker, raised under its lock. The reference the shard-held
/// baselines are compared with.
#[derive(Default)]
struct MapBaselines(HashMap<(u64, u32), Counts>);

impl MapBaselines {
    fn baseline(&self, key: u64, shard: u32) -> Counts {
        self.0.get(&(key, shard)).copied().unwrap_or_default()
    }

    fn raise(&mut self, key: u64, shard: u32, to: Counts) {
        let b = self.0.entry((key, shard)).or_default();
        b.launches = b.launches.max(to.launches);
        b.copies = b.copies.max(to.copies);
        b.ops = b.ops.max(to.ops);
    }

    fn retire(&mut self, shards: &[&Shard], want: impl Fn(u64) -> bool) {
        for s in shards {
            for (key, counts) in s.keys() {
                if want(key) {
                    self.raise(key, s.id(), counts);
                }
            }
        }
    }

    fn retire_in(&mut self, shard: &Shard, key: u64) {
        if let Some(c) = shard.counts(key) {
            self.raise(key, shard.id(), c);
        }
    }

    fn retire_event(&mut self, shards: &[&Shard], event: u64) {
        let latest = shards
            .iter()
            .filter_map(|s| s.event_mark(event).map(|m| (m, s.id())))
            .max_by_key(|(m, _)| m.seq);
        if let Some((m, shard)) = latest {
            self.raise(m.key, shard, m.counts);
        }
    }

    fn pending(&self, shards: &[&Shard]) -> Vec<Pending> {
        let mut by_key: BTreeMap<u64, Pending> = BTreeMap::new();
        for s in shards {
            let mut any = false;
            for (key, counts) in s.keys() {
                let since = counts.since(self.baseline(key, s.id()));
                if since.is_zero() {
                    continue;
                }
                any = true;
                let p = by_key.entry(key).or_insert_with(|| Pending {
                    key,
                    shards: Vec::new(),
                    counts: Counts::default(),
                    copies: Vec::new(),
                });
                p.shards.push(s.id());
                p.counts = p.counts.plus(since);
            }
            if !any {
                continue;
            }
            for c in s.copy_records() {
                if let Some(p) = by_key.get_mut(&c.key) {
                    if c.ordinal > self.baseline(c.key, s.id()).copies && p.shards.contains(&s.id())
                    {
                        p.copies.push(c);
                    }
                }
            }
        }
        by_key.into_values().collect()
    }
}

#[derive(Debug, Clone)]
enum WorkStep {
    Launch(usize, usize),
    Copy(usize, usize),
    Op(usize, usize),
    Record(usize, usize, usize),
    Retire(usize),
    RetireIn(usize, usize),
    RetireEvent(usize),
    RetireSome(u8),
}

const KEYS: [u64; 4] = [0x5000, 0x5100, 0x1001, 0x1002];
const EVENTS: [u64; 3] = [0xe0, 0xe40, 0xe80];

fn work_step() -> impl proptest::strategy::Strategy<Value = WorkStep> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (0..3usize, 0..4usize).prop_map(|(s, k)| WorkStep::Launch(s, k)),
        4 => (0..3usize, 0..4usize).prop_map(|(s, k)| WorkStep::Copy(s, k)),
        1 => (0..3usize, 0..4usize).prop_map(|(s, k)| WorkStep::Op(s, k)),
        2 => (0..3usize, 0..3usize, 0..4usize).prop_map(|(s, e, k)| WorkStep::Record(s, e, k)),
        2 => (0..4usize).prop_map(WorkStep::Retire),
        1 => (0..3usize, 0..4usize).prop_map(|(s, k)| WorkStep::RetireIn(s, k)),
        2 => (0..3usize).prop_map(WorkStep::RetireEvent),
        1 => any::<u8>().prop_map(WorkStep::RetireSome),
    ]
}

proptest::proptest! {
    /// Baselines held in the shards (raised without the tracker's lock) give the same
    /// pending work, counts and copies, after every step, as the map the tracker kept.
    #[test]
    fn shard_baselines_match_the_tracker_map(
        steps in proptest::collection::vec(work_step(), 1..120)
    ) {
        let t = Tracker::new();
        let own: Vec<Box<Shard>> = (0..3).map(|i| Box::new(Shard::new(i))).collect();
        let shards: Vec<&Shard> = own.iter().map(|b| &**b).collect();
        let mut old = MapBaselines::default();
        for (i, step) in steps.iter().enumerate() {
            match *step {
                WorkStep::Launch(s, k) => shards[s].add_launch(KEYS[k]),
                WorkStep::Copy(s, k) => {
                    shards[s].add_copy(KEYS[k], 0x7000 + i as u64, 0x9000, 64, CopyKind::HostToDevice);
                }
                WorkStep::Op(s, k) => shards[s].add_op(KEYS[k]),
                WorkStep::Record(s, e, k) => shards[s].add_event_record(EVENTS[e], KEYS[k]),
                WorkStep::Retire(k) => {
                    t.retire(&shards, |x| x == KEYS[k]);
                    old.retire(&shards, |x| x == KEYS[k]);
                }
                WorkStep::RetireIn(s, k) => {
                    shards[s].retire(KEYS[k]);
                    old.retire_in(shards[s], KEYS[k]);
                }
                WorkStep::RetireEvent(e) => {
                    retire_event_among(&shards, EVENTS[e]);
                    old.retire_event(&shards, EVENTS[e]);
                }
                WorkStep::RetireSome(mask) => {
                    let want = |x: u64| KEYS.iter().position(|&k| k == x).is_some_and(|j| mask & (1 << j) != 0);
                    t.retire(&shards, want);
                    old.retire(&shards, want);
                }
            }
            proptest::prop_assert_eq!(t.pending(&shards, |_| true), old.pending(&shards), "step {}", i);
        }
    }
}

#[derive(Debug, Clone)]
enum HandleStep {
    Context,
    Primary(usize),
    Stream(usize, Option<usize>),
    Event(usize, Option<usize>),
    ForgetStream(usize),
    ForgetEvent(usize),
    End(usize),
}

fn handle_step() -> impl proptest::strategy::Strategy<Value = HandleStep> {
    use proptest::prelude::*;
    prop_oneof![
        1 => Just(HandleStep::Context),
        1 => (0..3usize).prop_map(HandleStep::Primary),
        3 => (0..6usize, proptest::option::of(0..6usize)).prop_map(|(h, c)| HandleStep::Stream(h, c)),
        3 => (0..6usize, proptest::option::of(0..6usize)).prop_map(|(h, c)| HandleStep::Event(h, c)),
        2 => (0..6usize).prop_map(HandleStep::ForgetStream),
        2 => (0..6usize).prop_map(HandleStep::ForgetEvent),
        2 => (0..6usize).prop_map(HandleStep::End),
    ]
}

static MIRROR: AtomicUsize = AtomicUsize::new(0);

proptest::proptest! {
    /// The count of dead handles (the lock-free filter before a synchronize) is, after every
    /// step, the number of streams and events whose context ended, and the mirror reads it.
    #[test]
    fn dead_handle_count_is_exact(steps in proptest::collection::vec(handle_step(), 1..80)) {
        let mut t = Tracker::with_dead_handle_mirror(&MIRROR);
        let mut ids: Vec<u32> = Vec::new();
        for step in steps {
            let ctx = |c: Option<usize>, ids: &[u32]| c.and_then(|c| ids.get(c).copied());
            match step {
                HandleStep::Context => {
                    let s = site(&mut t, "cuCtxCreate_v2");
                    let h = 0x1000 + 0x100 * ids.len() as u64;
                    ids.extend(t.context_created(h, Some(0), s));
                }
                HandleStep::Primary(d) => {
                    // Primary contexts come back at the handle of their device: a live one
                    // of another kind at that handle ends quietly (add_context).
                    let s = site(&mut t, "cuDevicePrimaryCtxRetain");
                    ids.extend(t.primary_retained(0x1000 + 0x100 * d as u64, Some(d as i32), s));
                }
                HandleStep::Stream(h, c) => {
                    let s = site(&mut t, "cuStreamCreate");
                    t.stream_created(0x5000 + 0x100 * h as u64, ctx(c, &ids), s);
                }
                HandleStep::Event(h, c) => {
                    let s = site(&mut t, "cuEventCreate");
                    t.event_created(0xe000 + 0x100 * h as u64, ctx(c, &ids), s);
                }
                HandleStep::ForgetStream(h) => {
                    t.stream_forgotten(0x5000 + 0x100 * h as u64);
                }
                HandleStep::ForgetEvent(h) => {
                    t.event_forgotten(0xe000 + 0x100 * h as u64);
                }
                HandleStep::End(c) => {
                    if let Some(id) = ids.get(c).copied() {
                        let s = site(&mut t, "cuCtxDestroy_v2");
                        t.context_ended(id, EndKind::Destroyed, s, Counts::default(), &[]);
                    }
                }
            }
            let dead = t.streams.values().chain(t.events.values()).filter(|o| t.ended(o.ctx).is_some()).count();
            proptest::prop_assert_eq!(t.dead_handles(), dead);
            proptest::prop_assert_eq!(MIRROR.load(Ordering::Acquire), dead);
        }
    }
}

/// Context churn on two devices keeps the tracker's size: ended contexts beyond
/// KEEP_ENDED are forgotten unless a held stream names one, the per-device counts are
/// kept without walking, and a reused handle still counts generations while its latest
/// incarnation is remembered.
#[test]
fn context_churn_keeps_the_trackers_size() {
    let mut t = Tracker::new();
    let pairs = 10_000u64;
    let mut held_ctx = None;
    for i in 0..pairs {
        let s = site(&mut t, "cuCtxCreate_v2");
        let id = t
            .context_created(0x10_0000 + i * 0x100, Some((i % 2) as i32), s)
            .unwrap();
        if i == 10 {
            let s = site(&mut t, "cuStreamCreate");
            t.stream_created(0xabc, Some(id), s);
            held_ctx = Some(id);
        }
        let s = site(&mut t, "cuCtxDestroy_v2");
        t.context_ended(id, EndKind::Destroyed, s, Counts::default(), &[]);
    }
    // The last KEEP_ENDED, plus the one a held stream names.
    assert_eq!(t.contexts_remembered(), KEEP_ENDED + 1);
    let held = held_ctx.unwrap();
    assert!(t.ended(Some(held)).is_some());
    assert_eq!(t.dead_handles(), 1);
    t.stream_forgotten(0xabc);
    assert_eq!(t.contexts_remembered(), KEEP_ENDED);
    assert!(t.context(held).is_none());
    assert_eq!(t.dead_handles(), 0);
    let d = t.device_contexts();
    assert_eq!(d.len(), 2);
    assert_eq!((d[&0].contexts, d[&0].live), (5_000, 0));
    assert_eq!((d[&1].contexts, d[&1].live), (5_000, 0));
    assert_eq!(d[&1].first_function, "cuCtxCreate_v2");
    // The latest handle comes back: generation 2, it is remembered.
    let last = 0x10_0000 + (pairs - 1) * 0x100;
    let s = site(&mut t, "cuCtxCreate_v2");
    let id = t.context_created(last, Some(1), s).unwrap();
    assert_eq!(t.context(id).unwrap().generation, 2);
    assert_eq!(t.latest_context(last).map(|c| c.id), Some(id));
    assert_eq!(t.device_contexts()[&1].live, 1);
}
