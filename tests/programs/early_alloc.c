/* A preloaded allocator interposer in the classic pattern (libearly_alloc.so): malloc, free,
 * calloc and realloc forward to the next definitions, which it finds on first use with
 * dlsym(RTLD_NEXT, ...). While that look-up runs, allocations (dlsym's own calloc, on
 * glibc before 2.34, or any other thread's) come from a small static bump buffer, never
 * freed. Preloaded with the shim, the dlsym it calls is the shim's (the first definition in
 * the global scope), called from inside malloc, itself called from inside the shim.
 *
 * For the test program: early_alloc_mark(1) forgets the functions found (the next call
 * looks them up again) and counts the look-ups until early_alloc_mark(0);
 * early_alloc_stats(0) is the number of calls to the four functions, (1) the look-ups
 * counted while marked. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

typedef void *(*malloc_fn)(size_t);
typedef void (*free_fn)(void *);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);

static malloc_fn real_malloc;
static free_fn real_free;
static calloc_fn real_calloc;
static realloc_fn real_realloc;
static int resolving, marked;
static unsigned long calls, marked_lookups;

#define BOOT_SIZE (256 * 1024)
#define HEADER 16
static _Alignas(16) char boot[BOOT_SIZE];
static size_t boot_used;

static void *boot_alloc(size_t n) {
    size_t need = HEADER + ((n + 15) & ~(size_t)15);
    size_t at = __atomic_fetch_add(&boot_used, need, __ATOMIC_RELAXED);
    if (n > BOOT_SIZE || at + need > BOOT_SIZE) return NULL;
    *(size_t *)(boot + at) = n;
    return boot + at + HEADER; /* static storage: already zero, never reused */
}

static int in_boot(const void *p) {
    return (const char *)p >= boot && (const char *)p < boot + BOOT_SIZE;
}

static void resolve(void) {
    __atomic_store_n(&resolving, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&marked, __ATOMIC_SEQ_CST))
        __atomic_fetch_add(&marked_lookups, 1, __ATOMIC_RELAXED);
    void *m = dlsym(RTLD_NEXT, "malloc");
    void *f = dlsym(RTLD_NEXT, "free");
    void *c = dlsym(RTLD_NEXT, "calloc");
    void *r = dlsym(RTLD_NEXT, "realloc");
    __atomic_store_n(&real_free, (free_fn)f, __ATOMIC_RELEASE);
    __atomic_store_n(&real_calloc, (calloc_fn)c, __ATOMIC_RELEASE);
    __atomic_store_n(&real_realloc, (realloc_fn)r, __ATOMIC_RELEASE);
    __atomic_store_n(&real_malloc, (malloc_fn)m, __ATOMIC_RELEASE);
    __atomic_store_n(&resolving, 0, __ATOMIC_SEQ_CST);
}

/* Resolves on first use; 0 while a look-up is running (the caller uses the buffer). */
static int ready(void) {
    if (__atomic_load_n(&real_malloc, __ATOMIC_ACQUIRE)) return 1;
    if (__atomic_load_n(&resolving, __ATOMIC_SEQ_CST)) return 0;
    resolve();
    return __atomic_load_n(&real_malloc, __ATOMIC_ACQUIRE) != NULL;
}

void *malloc(size_t n) {
    __atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
    if (!ready()) return boot_alloc(n);
    return __atomic_load_n(&real_malloc, __ATOMIC_ACQUIRE)(n);
}

void *calloc(size_t a, size_t b) {
    __atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
    if (b && a > (size_t)-1 / b) return NULL;
    if (!ready()) return boot_alloc(a * b);
    return __atomic_load_n(&real_calloc, __ATOMIC_ACQUIRE)(a, b);
}

void free(void *p) {
    __atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
    if (!p || in_boot(p)) return;
    if (!ready()) return; /* only during a look-up: leaked, never wrong */
    __atomic_load_n(&real_free, __ATOMIC_ACQUIRE)(p);
}

void *realloc(void *p, size_t n) {
    __atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
    if (p && in_boot(p)) {
        size_t old = *(size_t *)((char *)p - HEADER);
        void *q = malloc(n);
        if (q) memcpy(q, p, old < n ? old : n);
        return q;
    }
    if (!ready()) return boot_alloc(n); /* p == NULL here in practice */
    return __atomic_load_n(&real_realloc, __ATOMIC_ACQUIRE)(p, n);
}

void early_alloc_mark(int on) {
    if (on) {
        __atomic_store_n(&marked, 1, __ATOMIC_SEQ_CST);
        __atomic_store_n(&real_malloc, NULL, __ATOMIC_RELEASE);
    } else {
        __atomic_store_n(&marked, 0, __ATOMIC_SEQ_CST);
    }
}

unsigned long early_alloc_stats(int which) {
    return which ? __atomic_load_n(&marked_lookups, __ATOMIC_RELAXED)
                 : __atomic_load_n(&calls, __ATOMIC_RELAXED);
}
