/* The program's libraries are its own (e2e::libs). Usage:
 *   libs close-at-exit DRIVER FILLER   dlopen DRIVER; a thread that then ends makes a
 *                                      context and an allocation on it and leaves both
 *                                      alive; dlclose DRIVER, dlopen FILLER (it takes the
 *                                      range DRIVER left); print and return 0 without
 *                                      flushing stdout (a crash at exit loses the line);
 *   libs reload DRIVER                 dlopen DRIVER, cuInit, cuDeviceGetCount; wait until
 *                                      the shim's threads but the trace writer ended (at
 *                                      most 5 s; SEEDANCE_TRACE_DIR must be set), dlclose; then say whether DRIVER is still
 *                                      loaded (dlopen RTLD_NOLOAD) and, opened again,
 *                                      what cuDeviceGetCount without cuInit returns
 *                                      (3, CUDA_ERROR_NOT_INITIALIZED, for a fresh copy);
 *   libs two-copies A B FILLER         dlopen A, cuInit, cuDeviceGetCount, cuDeviceGet(0);
 *                                      50 ms later dlclose A; the same with B, at once;
 *                                      dlopen FILLER (it takes a range a copy left); wait
 *                                      600 ms (a program that loads the driver from two
 *                                      paths, as containers with a compatibility driver
 *                                      do, while the shim's own thread still works).
 * Prints each result. */
#define _GNU_SOURCE
#include "cuda_min.h"
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef CUresult (*count_fn)(int *);

static void *must_open(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("open %s: %s\n", path, dlerror());
        exit(2);
    }
    return h;
}

static void *sym(void *h, const char *name) {
    void *p = dlsym(h, name);
    if (!p) {
        printf("dlsym %s: %s\n", name, dlerror());
        exit(2);
    }
    return p;
}

static void *driver;

static void *make_and_leave(void *arg) {
    CUdevice dev = -1;
    CUcontext ctx = NULL;
    CUdeviceptr ptr = 0;
    (void)arg;
    CUresult a = ((PFN_cuInit)sym(driver, "cuInit"))(0);
    CUresult b = ((PFN_cuDeviceGet)sym(driver, "cuDeviceGet"))(&dev, 0);
    CUresult c = ((PFN_cuCtxCreate_v2)sym(driver, "cuCtxCreate_v2"))(&ctx, 0, dev);
    CUresult d = ((PFN_cuMemAlloc_v2)sym(driver, "cuMemAlloc_v2"))(&ptr, 1 << 20);
    /* A second context, made and destroyed: its end is judged with the allocation alive. */
    CUcontext other = NULL;
    CUresult e = ((PFN_cuCtxCreate_v2)sym(driver, "cuCtxCreate_v2"))(&other, 0, dev);
    CUresult f = ((PFN_cuCtxDestroy_v2)sym(driver, "cuCtxDestroy_v2"))(other);
    printf("thread: %d %d %d %d %d %d\n", a, b, c, d, e, f);
    return NULL;
}

/* Whether the shim's own threads are done: every thread of this process but the main one,
 * the trace writer ("seedance-trace", which the session record's thread starts) and the
 * exit's thread ("seedance-exit", which waits for the exit and holds nothing meanwhile) has
 * ended, and the writer exists. A thread's name is set by the thread itself, so a thread
 * not named yet counts as running. */
static int only_writer_left(void) {
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int others = 0, writer = 0;
    char me[32];
    if (!d) return 1;
    snprintf(me, sizeof me, "%d", getpid());
    while ((e = readdir(d))) {
        char path[300], comm[64] = "";
        if (e->d_name[0] == '.' || strcmp(e->d_name, me) == 0) continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = 0;
        fclose(f);
        if (strcmp(comm, "seedance-trace") == 0)
            writer = 1;
        else if (strcmp(comm, "seedance-exit") != 0)
            others++;
    }
    closedir(d);
    return writer && others == 0;
}

static void use(void *h, const char *which) {
    int n = -1;
    CUresult a = ((PFN_cuInit)sym(h, "cuInit"))(0);
    CUresult b = ((count_fn)sym(h, "cuDeviceGetCount"))(&n);
    CUdevice dev = -1;
    CUresult c = ((PFN_cuDeviceGet)sym(h, "cuDeviceGet"))(&dev, 0);
    printf("%s: cuInit -> %d, cuDeviceGetCount -> %d, count %d, cuDeviceGet(0) -> %d\n",
           which, a, b, n, c);
}

int main(int argc, char **argv) {
    const char *how = argc > 1 ? argv[1] : "";
    if (strcmp(how, "close-at-exit") == 0 && argc > 3) {
        pthread_t t;
        driver = must_open(argv[2]);
        if (pthread_create(&t, NULL, make_and_leave, NULL) || pthread_join(t, NULL)) return 3;
        dlclose(driver);
        if (getenv("LIBS_SAY_LOADED")) {
            void *still = dlopen(argv[2], RTLD_NOW | RTLD_NOLOAD);
            printf("after dlclose: %s\n", still ? "still loaded" : "unloaded");
            if (still) dlclose(still);
        }
        if (!dlopen(argv[3], RTLD_NOW | RTLD_LOCAL)) printf("filler: %s\n", dlerror());
        printf("closed; exit 0\n"); /* left in the buffer: written at exit */
        return 0;
    }
    if (strcmp(how, "reload") == 0 && argc > 2) {
        void *h = must_open(argv[2]);
        use(h, "first");
        for (int i = 0; i < 500 && !only_writer_left(); i++) usleep(10000);
        dlclose(h);
        void *still = dlopen(argv[2], RTLD_NOW | RTLD_NOLOAD);
        printf("after dlclose: %s\n", still ? "still loaded" : "unloaded");
        if (still) dlclose(still);
        h = must_open(argv[2]);
        int n = -1;
        CUresult r = ((count_fn)sym(h, "cuDeviceGetCount"))(&n);
        printf("opened again: cuDeviceGetCount without cuInit -> %d\n", r);
        dlclose(h);
        return 0;
    }
    if (strcmp(how, "two-copies") == 0 && argc > 4) {
        void *h = must_open(argv[2]);
        use(h, "A");
        usleep(50000);
        dlclose(h);
        h = must_open(argv[3]);
        use(h, "B");
        dlclose(h);
        if (!dlopen(argv[4], RTLD_NOW | RTLD_LOCAL)) printf("filler: %s\n", dlerror());
        usleep(600000);
        printf("done\n");
        return 0;
    }
    return 2;
}
