/* Thread-scaling benchmark of the driver calls the shim tracks (scripts/bench/gpu-threads.sh).
 *
 *   threads_bench THREADS ITERATIONS
 *
 * Starts THREADS host threads, each with its own non-blocking stream, a 4 KiB pinned
 * buffer (cuMemHostAlloc), a 4 KiB pageable buffer (malloc), a 4 KiB device buffer and an
 * event, all on device 0's primary context. For each operation in turn every thread runs
 * WARMUP untimed iterations of it, meets the others at a barrier, then runs ITERATIONS of it
 * timed:
 *
 *   pinned_copy    cuMemcpyHtoDAsync_v2 from the pinned buffer, cuStreamSynchronize every 64
 *   pageable_copy  the same from the pageable buffer
 *   launch         cuLaunchKernel of an empty kernel, cuStreamSynchronize every 64
 *   alloc_free     cuMemAlloc_v2 + cuMemFree_v2 of 4 KiB (ITERATIONS / ALLOC_EVERY pairs,
 *                  default 50: a pair takes about 68 us, docs/design.md fact 8)
 *   event_wait     cuEventRecord on the stream + cuStreamWaitEvent of it on the same stream,
 *                  after a pinned copy, cuStreamSynchronize every 64
 *
 * Output, one line per operation:
 *
 *   op NAME threads T ns_per_op WALL cpu_ns_per_op CPU median_thread_ns MED iterations N
 *
 * WALL: nanoseconds from the first thread's start to the last thread's end, over the iterations of one
 * thread (the process's throughput: T operations take WALL ns); CPU: the threads' mean CPU
 * time (CLOCK_THREAD_CPUTIME_ID) per operation, what the calls cost the host whether or not
 * the GPU is the bottleneck; MED: the median thread's own wall time per operation; N: the
 * timed iterations per thread (fewer for alloc_free: ALLOC_EVERY). Exit
 * status 1 on any driver failure (its name and code on stderr).
 *
 * Environment: SCHED = blocking (default: the primary context's CU_CTX_SCHED_BLOCKING_SYNC,
 * so a thread waiting in cuStreamSynchronize sleeps instead of spinning on a core another
 * thread needs to submit: with 64 threads on 16 cores the spinning decided which threads ran,
 * the main noise of the event_wait rows in docs/performance.md), spin, yield or auto (the
 * driver's default, as before 2026-12-02). WARMUP = untimed iterations per operation and
 * thread (default ITERATIONS / 10, at most 1000). OPS = the operations to run, by name,
 * separated by spaces or commas (default all; an unknown name is a usage error, exit 2).
 * ALLOC_EVERY = iterations per alloc_free pair (default 50; a longer alloc_free window with
 * a smaller value).
 *
 * Interleaved (INTERLEAVE=BLOCK, a number of iterations): the shim's cost measured inside one
 * process, without the run-to-run noise of separate processes. Every operation runs PAIRS
 * (default 20) pairs of blocks of BLOCK iterations on every thread, all threads in step (a
 * barrier before each block): one block calls the driver through the symbols the program
 * links against (the shim's wrappers when it is preloaded), the other through the driver's
 * own definitions, looked up in libcuda.so.1 with glibc's dlsym (reached with dlvsym on
 * libc's handle, so that a preloaded dlsym cannot answer), the order alternating pair by
 * pair (AB, BA, ...). Without a preload both blocks reach the driver: the in-process A/A
 * control. Output, one line per pair:
 *
 *   pair NAME threads T index P linked_wall W direct_wall W linked_cpu C direct_cpu C
 *
 * (ns per operation: the block's wall time from the first thread's start to the last one's
 * end, and the threads' mean CPU time). What the shim does to the driver's state outside
 * its wrappers (its own calls, its memory) is in both blocks alike: the process-level
 * schedule of scripts/bench/gpu-threads.sh covers that; this measures what its wrappers add.
 * Calls through the direct definitions are invisible to the shim, which forgets nothing
 * it needs for these loops (each thread keeps to its own stream and buffers).
 *
 * GAP_SPIN=K (interleaved mode, alloc_free): the "linked" block also runs K iterations of an
 * empty loop (a volatile counter) right after each cuMemAlloc_v2 and cuMemFree_v2 returns,
 * as a wrapper's work after the driver call would. Without a preload this measures how much
 * wall time a given CPU time between a thread's two driver calls costs (the CPU time added
 * is in the pair lines). Not a number of iterations: usage error (exit 2).
 *
 * LINKED=dlsym (interleaved mode): the "linked" block reaches the driver through the
 * addresses the program's dlsym(RTLD_DEFAULT, name) gives, as a runtime that looks the
 * driver up does, instead of the symbols it links against (the shim is on both paths).
 * Any other value is a usage error (exit 2).
 *
 * PERF=1 (interleaved mode, Linux): each thread also counts hardware events of its own user
 * space (perf_event_open(2), one counter per event, scaled when the kernel multiplexes
 * them) around each block, and one line per operation, mode and event gives the count per
 * operation summed over threads and blocks:
 *
 *   perf NAME threads T event E linked L direct D added A
 *
 * (A = L - D: what the wrappers add per operation). Events: cycles, instructions,
 * branch_misses, l1d_misses, l1i_misses, llc_misses, dtlb_misses, itlb_misses; one the
 * machine does not count is left out, with a line on stderr.
 *
 * Built with nvcc against cuda.h on a GPU machine; with -DBENCH_FAKE_DRIVER against the
 * repository's fake driver (crates/fake-cuda, declarations from tests/programs/cuda_calls.h),
 * which has no modules or context flags: the kernel is a handle the fake accepts, SCHED is
 * not applied. */
#define _GNU_SOURCE /* dlvsym, dladdr */
#ifdef BENCH_FAKE_DRIVER
#include "../../tests/programs/cuda_calls.h"
CUresult cuStreamWaitEvent(CUstream, CUevent, unsigned int);
#define CU_STREAM_NON_BLOCKING 1
#define CU_EVENT_DISABLE_TIMING 2
#define CUDA_SUCCESS 0
#else
#include <cuda.h>
#endif
#include "cu_check.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <linux/perf_event.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

enum { PINNED, PAGEABLE, LAUNCH, ALLOC, EVENT, OPS };
static const char *names[OPS] = {"pinned_copy", "pageable_copy", "launch", "alloc_free",
                                 "event_wait"};

static CUcontext ctx;
static CUfunction kernel;
static int iterations, warmup, alloc_every = 50;
static int selected[OPS];
static pthread_barrier_t barrier;
static double begin[OPS][1024], end[OPS][1024], cpu[OPS][1024], own[OPS][1024];

/* The driver calls the loops make, through one path. */
struct api {
    CUresult (*htod)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                       unsigned, CUstream, void **, void **);
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*free_)(CUdeviceptr);
    CUresult (*record)(CUevent, CUstream);
    CUresult (*wait)(CUstream, CUevent, unsigned int);
    CUresult (*sync)(CUstream);
};
/* LINKED: the program's own symbols (the shim's when preloaded); DIRECT: libcuda's. */
static struct api linked = {cuMemcpyHtoDAsync_v2, cuLaunchKernel, cuMemAlloc_v2, cuMemFree_v2,
                            cuEventRecord, cuStreamWaitEvent, cuStreamSynchronize};
static struct api direct;
static int block_len, pairs = 20, nthreads;
/* GAP_SPIN: empty-loop iterations after each driver call of a linked alloc_free block. */
static int gap_spin;

static void spin(int k) {
    for (volatile int j = 0; j < k; j++) {
    }
}
/* Per op, block and thread (interleaved mode): start, end and CPU time. */
static double *blk_begin[OPS], *blk_end[OPS], *blk_cpu[OPS];

/* PERF=1: hardware events per block (see the header). */
enum { NPERF = 8 };
static const char *perf_names[NPERF] = {"cycles",     "instructions", "branch_misses",
                                        "l1d_misses", "l1i_misses",   "llc_misses",
                                        "dtlb_misses", "itlb_misses"};
static int perf_on, perf_ok[NPERF];
/* [op][0 linked, 1 direct][event]: scaled counts summed over threads and blocks. */
static double perf_sum[OPS][2][NPERF];
static pthread_mutex_t perf_lock = PTHREAD_MUTEX_INITIALIZER;
/* One thread's counters: raw value, time enabled, time running. */
struct perf_reading {
    double v[NPERF][3];
};
#ifdef __linux__
static int perf_open1(int i) {
    static const uint64_t cache[NPERF] = {
        0, 0, 0,
        PERF_COUNT_HW_CACHE_L1D | (PERF_COUNT_HW_CACHE_OP_READ << 8) |
            (PERF_COUNT_HW_CACHE_RESULT_MISS << 16),
        PERF_COUNT_HW_CACHE_L1I | (PERF_COUNT_HW_CACHE_OP_READ << 8) |
            (PERF_COUNT_HW_CACHE_RESULT_MISS << 16),
        PERF_COUNT_HW_CACHE_LL | (PERF_COUNT_HW_CACHE_OP_READ << 8) |
            (PERF_COUNT_HW_CACHE_RESULT_MISS << 16),
        PERF_COUNT_HW_CACHE_DTLB | (PERF_COUNT_HW_CACHE_OP_READ << 8) |
            (PERF_COUNT_HW_CACHE_RESULT_MISS << 16),
        PERF_COUNT_HW_CACHE_ITLB | (PERF_COUNT_HW_CACHE_OP_READ << 8) |
            (PERF_COUNT_HW_CACHE_RESULT_MISS << 16)};
    static const uint64_t hw[3] = {PERF_COUNT_HW_CPU_CYCLES, PERF_COUNT_HW_INSTRUCTIONS,
                                   PERF_COUNT_HW_BRANCH_MISSES};
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = i < 3 ? PERF_TYPE_HARDWARE : PERF_TYPE_HW_CACHE;
    a.config = i < 3 ? hw[i] : cache[i];
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
}
static void perf_read(const int *fd, struct perf_reading *r) {
    for (int i = 0; i < NPERF; i++) {
        uint64_t x[3] = {0, 0, 0};
        if (fd[i] >= 0 && read(fd[i], x, sizeof x) != (ssize_t)sizeof x) x[0] = x[1] = x[2] = 0;
        for (int k = 0; k < 3; k++) r->v[i][k] = (double)x[k];
    }
}
#endif
/* Adds the scaled difference of two readings to sum[event]. */
static void perf_add(const struct perf_reading *a, const struct perf_reading *b, double *sum) {
    for (int i = 0; i < NPERF; i++) {
        double raw = b->v[i][0] - a->v[i][0], en = b->v[i][1] - a->v[i][1],
               run = b->v[i][2] - a->v[i][2];
        if (run > 0) sum[i] += raw * en / run;
    }
}

static double clock_ns(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* Timed iterations of op: alloc_free runs one pair per alloc_every iterations. */
static int count(int op, int iters) {
    if (op != ALLOC) return iters;
    return iters / alloc_every > 0 ? iters / alloc_every : 1;
}

/* One iteration i (1-based) of operation op on the thread's resources. */
static void step(const struct api *a, int op, int i, CUstream s, CUevent e, CUdeviceptr d,
                 void *pinned, void *pageable, size_t bytes) {
    switch (op) {
    case PINNED:
        CHECK(a->htod(d, pinned, bytes, s));
        break;
    case PAGEABLE:
        CHECK(a->htod(d, pageable, bytes, s));
        break;
    case LAUNCH:
        CHECK(a->launch(kernel, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
        break;
    case ALLOC: {
        CUdeviceptr p;
        CHECK(a->alloc(&p, bytes));
        if (a == &linked) spin(gap_spin);
        CHECK(a->free_(p));
        if (a == &linked) spin(gap_spin);
        break;
    }
    case EVENT:
        CHECK(a->htod(d, pinned, bytes, s));
        CHECK(a->record(e, s));
        CHECK(a->wait(s, e, 0));
        break;
    }
    if (op != ALLOC && i % 64 == 0) CHECK(a->sync(s));
}

/* Interleaved mode: thread w's PAIRS pairs of blocks of op, linked and direct in turn. */
static void blocks(int w, int op, CUstream s, CUevent e, CUdeviceptr d, void *pinned,
                   void *pageable, size_t bytes, const int *fd) {
    int n = count(op, block_len);
    double sums[2][NPERF] = {{0}};
    struct perf_reading r0, r1;
    (void)fd;
    for (int b = 0; b < 2 * pairs; b++) {
        /* Pair p runs linked first when p is even: AB, BA, AB, ... */
        int p = b / 2, first = b % 2 == 0;
        const struct api *a = (p % 2 == 0) == first ? &linked : &direct;
        pthread_barrier_wait(&barrier);
#ifdef __linux__
        if (perf_on) perf_read(fd, &r0);
#endif
        double c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), t0 = clock_ns(CLOCK_MONOTONIC);
        for (int i = 1; i <= n; i++) step(a, op, i, s, e, d, pinned, pageable, bytes);
        CHECK(a->sync(s));
#ifdef __linux__
        if (perf_on) {
            perf_read(fd, &r1);
            perf_add(&r0, &r1, sums[a == &direct]);
        }
#endif
        size_t at = (size_t)b * (size_t)nthreads + (size_t)w;
        blk_begin[op][at] = t0;
        blk_end[op][at] = clock_ns(CLOCK_MONOTONIC);
        blk_cpu[op][at] = clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
    }
    if (perf_on) {
        pthread_mutex_lock(&perf_lock);
        for (int m = 0; m < 2; m++)
            for (int i = 0; i < NPERF; i++) perf_sum[op][m][i] += sums[m][i];
        pthread_mutex_unlock(&perf_lock);
    }
}

static void *run(void *arg) {
    int w = (int)(long)arg;
    CUstream s;
    CUevent e;
    CUdeviceptr d;
    void *pinned;
    size_t bytes = 4096;
    int fd[NPERF];
    for (int i = 0; i < NPERF; i++) fd[i] = -1;
#ifdef __linux__
    for (int i = 0; perf_on && i < NPERF; i++)
        if (perf_ok[i]) fd[i] = perf_open1(i);
#endif
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CHECK(cuMemAlloc_v2(&d, bytes));
    CHECK(cuMemHostAlloc(&pinned, bytes, 0));
    char *pageable = malloc(bytes);
    memset(pinned, 1, bytes);
    memset(pageable, 2, bytes);
    for (int op = 0; op < OPS; op++) {
        if (!selected[op]) continue;
        int n = count(op, iterations);
        int m = op == ALLOC ? (warmup / alloc_every > 0 ? warmup / alloc_every : (warmup > 0))
                            : warmup;
        for (int i = 1; i <= m; i++) step(&linked, op, i, s, e, d, pinned, pageable, bytes);
        CHECK(cuStreamSynchronize(s));
        if (block_len) {
            /* Warm the direct path too. */
            for (int i = 1; i <= m; i++) step(&direct, op, i, s, e, d, pinned, pageable, bytes);
            CHECK(direct.sync(s));
            blocks(w, op, s, e, d, pinned, pageable, bytes, fd);
            pthread_barrier_wait(&barrier);
            continue;
        }
        pthread_barrier_wait(&barrier);
        double c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), t0 = clock_ns(CLOCK_MONOTONIC);
        begin[op][w] = t0;
        for (int i = 1; i <= n; i++) step(&linked, op, i, s, e, d, pinned, pageable, bytes);
        CHECK(cuStreamSynchronize(s));
        double t1 = clock_ns(CLOCK_MONOTONIC);
        end[op][w] = t1;
        own[op][w] = (t1 - t0) / n;
        cpu[op][w] = (clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0) / n;
        pthread_barrier_wait(&barrier);
    }
    CHECK(cuMemFreeHost(pinned));
    CHECK(cuMemFree_v2(d));
    CHECK(cuEventDestroy_v2(e));
    CHECK(cuStreamDestroy_v2(s));
    free(pageable);
#ifdef __linux__
    for (int i = 0; i < NPERF; i++)
        if (fd[i] >= 0) close(fd[i]);
#endif
    return NULL;
}

typedef void *(*dlsym_fn)(void *, const char *);

/* Fills `a` with each function `look(handle, name)` gives; exits 2, saying `what` and the
 * name, when one is not found. */
static void fill_api(struct api *a, dlsym_fn look, void *handle, const char *what) {
#define FILL(field, name)                                                                   \
    if (!(*(void **)&a->field = look(handle, name))) {                                      \
        fprintf(stderr, "%s: %s not found\n", what, name);                                  \
        exit(2);                                                                            \
    }
    FILL(htod, "cuMemcpyHtoDAsync_v2")
    FILL(launch, "cuLaunchKernel")
    FILL(alloc, "cuMemAlloc_v2")
    FILL(free_, "cuMemFree_v2")
    FILL(record, "cuEventRecord")
    FILL(wait, "cuStreamWaitEvent")
    FILL(sync, "cuStreamSynchronize")
#undef FILL
}

/* LINKED=dlsym: fills `linked` from the program's dlsym (a preloaded one answers). */
static void resolve_linked_by_dlsym(void) {
    fill_api(&linked, dlsym, RTLD_DEFAULT, "LINKED=dlsym");
}

/* Fills `direct` from libcuda.so.1's own definitions; exits 2 when one cannot be found. */
static void resolve_direct(void) {
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    dlsym_fn look = NULL;
    const char *versions[] = {"GLIBC_2.34", "GLIBC_2.17", "GLIBC_2.2.5"};
    for (int i = 0; libc && !look && i < 3; i++) look = (dlsym_fn)dlvsym(libc, "dlsym", versions[i]);
    void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!look || !cuda) {
        fprintf(stderr, "INTERLEAVE: glibc's dlsym or libcuda.so.1 not found\n");
        exit(2);
    }
    fill_api(&direct, look, cuda, "INTERLEAVE: libcuda.so.1");
    Dl_info li, di;
    if (dladdr(*(void **)&linked.htod, &li) && dladdr(*(void **)&direct.htod, &di))
        fprintf(stderr, "interleave: linked %s, direct %s\n", li.dli_fname, di.dli_fname);
}

/* The threads' span from the first start to the last end in `b` and `e` and their mean of
 * `c` (one value per thread each), both over n iterations: ns per operation. */
static void span(const double *b, const double *e, const double *c, int threads, int n,
                 double *wall, double *cpu_mean) {
    double first = b[0], last = e[0], sum = 0;
    for (int w = 0; w < threads; w++) {
        if (b[w] < first) first = b[w];
        if (e[w] > last) last = e[w];
        sum += c[w];
    }
    *wall = (last - first) / n;
    *cpu_mean = sum / threads / n;
}

/* Interleaved mode's output: one line per pair of op. */
static void print_pairs(int op, int threads) {
    int n = count(op, block_len);
    double wall[2], cpu_[2];
    for (int p = 0; p < pairs; p++) {
        for (int k = 0; k < 2; k++) {
            int b = 2 * p + k, is_linked = (p % 2 == 0) == (k == 0);
            size_t at = (size_t)b * (size_t)threads;
            span(blk_begin[op] + at, blk_end[op] + at, blk_cpu[op] + at, threads, n,
                 &wall[!is_linked], &cpu_[!is_linked]);
        }
        printf("pair %s threads %d index %d linked_wall %.1f direct_wall %.1f linked_cpu %.1f "
               "direct_cpu %.1f\n",
               names[op], threads, p, wall[0], wall[1], cpu_[0], cpu_[1]);
    }
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s THREADS ITERATIONS\n", argv[0]);
        return 2;
    }
    int threads = atoi(argv[1]);
    iterations = atoi(argv[2]);
    if (threads < 1 || threads > 1024 || iterations < 1) return 2;
    const char *w = getenv("WARMUP");
    warmup = w ? atoi(w) : (iterations / 10 < 1000 ? iterations / 10 : 1000);
    if (warmup < 0) return 2;
    const char *every = getenv("ALLOC_EVERY");
    if (every && (alloc_every = atoi(every)) < 1) {
        fprintf(stderr, "ALLOC_EVERY=%s: not a positive number of iterations\n", every);
        return 2;
    }
    const char *gap = getenv("GAP_SPIN");
    char *gap_end = NULL;
    long gap_v = gap ? strtol(gap, &gap_end, 10) : 0;
    if (gap && (!*gap || *gap_end || gap_v < 0 || gap_v > 1000000000L)) {
        fprintf(stderr, "GAP_SPIN=%s: not a number of iterations\n", gap);
        return 2;
    }
    gap_spin = (int)gap_v;
    const char *ops = getenv("OPS");
    if (!ops || !*ops) {
        for (int op = 0; op < OPS; op++) selected[op] = 1;
    } else {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", ops);
        for (char *tok = strtok(buf, " ,"); tok; tok = strtok(NULL, " ,")) {
            int found = 0;
            for (int op = 0; op < OPS; op++)
                if (strcmp(tok, names[op]) == 0) selected[op] = found = 1;
            if (!found) {
                fprintf(stderr, "OPS: unknown operation %s (pinned_copy, pageable_copy, "
                                "launch, alloc_free, event_wait)\n", tok);
                return 2;
            }
        }
    }
    const char *il = getenv("INTERLEAVE");
    if (il && *il) {
        const char *pp = getenv("PAIRS");
        block_len = atoi(il);
        if (pp && *pp) pairs = atoi(pp);
        if (block_len < 1 || pairs < 1) {
            fprintf(stderr, "INTERLEAVE=%s PAIRS=%s: not positive numbers\n", il, pp ? pp : "");
            return 2;
        }
    }
    const char *pf = getenv("PERF");
    if (pf && strcmp(pf, "1") == 0 && block_len) {
#ifdef __linux__
        for (int i = 0; i < NPERF; i++) {
            int f = perf_open1(i);
            perf_ok[i] = f >= 0;
            if (f >= 0) {
                close(f);
                perf_on = 1;
            } else {
                fprintf(stderr, "PERF: %s not counted here (perf_event_open failed)\n",
                        perf_names[i]);
            }
        }
#else
        fprintf(stderr, "PERF: hardware counters are read on Linux only\n");
#endif
    } else if (pf && *pf && strcmp(pf, "0") != 0) {
        fprintf(stderr, "PERF=%s: 1 (with INTERLEAVE) counts hardware events; ignored\n", pf);
    }
    CUdevice dev;
    CHECK(cuInit(0));
    nthreads = threads;
    if (block_len) {
        const char *lk = getenv("LINKED");
        if (lk && *lk && strcmp(lk, "dlsym") != 0) {
            fprintf(stderr, "LINKED=%s: only dlsym (or unset: the linked symbols)\n", lk);
            return 2;
        }
        if (lk && *lk) resolve_linked_by_dlsym();
        resolve_direct();
        for (int op = 0; op < OPS; op++) {
            size_t cells = 2 * (size_t)pairs * (size_t)threads;
            blk_begin[op] = calloc(cells, sizeof(double));
            blk_end[op] = calloc(cells, sizeof(double));
            blk_cpu[op] = calloc(cells, sizeof(double));
            if (!blk_begin[op] || !blk_end[op] || !blk_cpu[op]) return 2;
        }
    }
    CHECK(cuDeviceGet(&dev, 0));
#ifdef BENCH_FAKE_DRIVER
    kernel = KERNEL;
#else
    const char *sched = getenv("SCHED") ? getenv("SCHED") : "blocking";
    unsigned flags = strcmp(sched, "spin") == 0       ? CU_CTX_SCHED_SPIN
                     : strcmp(sched, "yield") == 0    ? CU_CTX_SCHED_YIELD
                     : strcmp(sched, "blocking") == 0 ? CU_CTX_SCHED_BLOCKING_SYNC
                                                      : CU_CTX_SCHED_AUTO;
    CHECK(cuDevicePrimaryCtxSetFlags(dev, flags));
#endif
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
#ifndef BENCH_FAKE_DRIVER
    static const char *ptx = ".version 8.0\n.target sm_90\n.address_size 64\n"
                             ".visible .entry empty()\n{\n\tret;\n}\n";
    CUmodule mod;
    CHECK(cuModuleLoadData(&mod, ptx));
    CHECK(cuModuleGetFunction(&kernel, mod, "empty"));
#endif
    pthread_barrier_init(&barrier, NULL, (unsigned)threads);
    pthread_t *t = calloc((size_t)threads, sizeof *t);
    for (long i = 0; i < threads; i++) pthread_create(&t[i], NULL, run, (void *)i);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    for (int op = 0; op < OPS && block_len; op++)
        if (selected[op]) print_pairs(op, threads);
    for (int op = 0; op < OPS && perf_on; op++) {
        if (!selected[op]) continue;
        /* Operations per mode: pairs blocks of n on every thread. */
        double ops_per_mode = (double)pairs * count(op, block_len) * threads;
        for (int i = 0; i < NPERF; i++) {
            if (!perf_ok[i]) continue;
            double l = perf_sum[op][0][i] / ops_per_mode, d = perf_sum[op][1][i] / ops_per_mode;
            printf("perf %s threads %d event %s linked %.2f direct %.2f added %.2f\n", names[op],
                   threads, perf_names[i], l, d, l - d);
        }
    }
    for (int op = 0; op < OPS && !block_len; op++) {
        if (!selected[op]) continue;
        int n = count(op, iterations);
        double wall, cpu_ns;
        /* cpu[] already holds ns per operation: its mean over one "iteration". */
        span(begin[op], end[op], cpu[op], threads, 1, &wall, &cpu_ns);
        qsort(own[op], (size_t)threads, sizeof own[op][0], by_value);
        printf("op %s threads %d ns_per_op %.0f cpu_ns_per_op %.0f median_thread_ns %.0f "
               "iterations %d\n",
               names[op], threads, wall / n, cpu_ns, own[op][threads / 2], n);
    }
    CHECK(cuDevicePrimaryCtxRelease_v2(dev));
    return 0;
}
