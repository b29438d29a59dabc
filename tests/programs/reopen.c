/* How programs find, lose and find again the driver library (e2e::reopen). Usage:
 *   reopen reopen   FIRST SECOND [FILLER]   dlopen FIRST, cuInit and cuDeviceGetCount
 *                                  through dlsym, dlclose it, dlopen FILLER (any library:
 *                                  it takes the address range FIRST left, so that SECOND
 *                                  loads elsewhere), then the same with SECOND;
 *   reopen dlmopen  FIRST SECOND   the same, FIRST opened with dlmopen(LM_ID_NEWLM);
 *                                  with REOPEN_HOLD_MS=<ms> set, both sleep that long
 *                                  before they close FIRST, with REOPEN_PAUSE_MS=<ms>
 *                                  right after;
 *   reopen fallback STUB REAL      dlopen STUB; its cuInit fails; dlopen REAL by path
 *                                  (STUB stays open) and use it;
 *   reopen pseudo   LIB            dlsym(RTLD_DEFAULT / RTLD_NEXT, "cuInit") with no
 *                                  driver loaded, after dlopen(LIB, RTLD_LOCAL), and
 *                                  after dlopen(LIB, RTLD_GLOBAL) (then call it).
 * Prints each result. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

typedef int (*init_fn)(unsigned);
typedef int (*count_fn)(int *);

static void *open_lib(const char *how, const char *path) {
    void *h = strcmp(how, "dlmopen") == 0 ? dlmopen(LM_ID_NEWLM, path, RTLD_NOW | RTLD_LOCAL)
                                          : dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) printf("open %s: %s\n", path, dlerror());
    return h;
}

static int use(void *h, const char *which) {
    init_fn init = (init_fn)dlsym(h, "cuInit");
    count_fn count = (count_fn)dlsym(h, "cuDeviceGetCount");
    int n = -1, r;
    if (!init || !count) {
        printf("%s: dlsym failed\n", which);
        return 1;
    }
    r = init(0);
    int rc = count(&n);
    printf("%s: cuInit -> %d, cuDeviceGetCount -> %d, count %d\n", which, r, rc, n);
    return 0;
}

static void pseudo(const char *label) {
    void *d, *n;
    const char *ed, *en;
    dlerror();
    d = dlsym(RTLD_DEFAULT, "cuInit");
    ed = dlerror();
    n = dlsym(RTLD_NEXT, "cuInit");
    en = dlerror();
    printf("%s: RTLD_DEFAULT %s (dlerror %s), RTLD_NEXT %s (dlerror %s)\n", label,
           d ? "found" : "NULL", ed ? "set" : "clear", n ? "found" : "NULL",
           en ? "set" : "clear");
    if (d) printf("%s: cuInit through RTLD_DEFAULT -> %d\n", label, ((init_fn)d)(0));
}

int main(int argc, char **argv) {
    const char *s = argc > 1 ? argv[1] : "";
    if (strcmp(s, "pseudo") == 0 && argc > 2) {
        pseudo("no driver");
        void *h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
        pseudo("RTLD_LOCAL driver");
        void *g = dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL);
        if (!h || !g) return 2;
        pseudo("RTLD_GLOBAL driver");
        return 0;
    }
    if (argc < 4) return 2;
    if (strcmp(s, "reopen") == 0 || strcmp(s, "dlmopen") == 0) {
        void *h = open_lib(s, argv[2]);
        if (!h || use(h, "first")) return 2;
        const char *hold = getenv("REOPEN_HOLD_MS");
        if (hold && *hold) usleep((useconds_t)atoi(hold) * 1000);
        dlclose(h);
        const char *pause = getenv("REOPEN_PAUSE_MS");
        if (pause && *pause) usleep((useconds_t)atoi(pause) * 1000);
        if (argc > 4 && !dlopen(argv[4], RTLD_NOW | RTLD_LOCAL)) printf("filler: %s\n", dlerror());
        h = open_lib("dlopen", argv[3]);
        if (!h || use(h, "second")) return 2;
        return 0;
    }
    if (strcmp(s, "fallback") == 0) {
        void *stub = open_lib("dlopen", argv[2]);
        if (!stub) return 2;
        init_fn init = (init_fn)dlsym(stub, "cuInit");
        int r = init ? init(0) : -1;
        printf("stub: cuInit -> %d\n", r);
        void *real = open_lib("dlopen", argv[3]);
        if (!real || use(real, "real")) return 2;
        return 0;
    }
    return 2;
}
