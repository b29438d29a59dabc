/* Preloaded probe for the RTLD_NEXT check (matrix_omp.py): resolves symbols with
 * dlsym(RTLD_NEXT, ...) from inside this library and reports which object answered, and
 * whether the answer equals the global (RTLD_DEFAULT) one. Same text with and without the
 * shim means the shim's exported dlsym kept the caller's identity. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static const char *base(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

const char *probe_report(void) {
    static char buf[1024];
    const char *names[] = {"omp_get_max_threads", "GOMP_parallel", "malloc", "pthread_create", "dlopen"};
    size_t off = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *next = dlsym(RTLD_NEXT, names[i]);
        void *global = dlsym(RTLD_DEFAULT, names[i]);
        Dl_info info;
        const char *obj = (next && dladdr(next, &info) && info.dli_fname) ? base(info.dli_fname) : "none";
        off += snprintf(buf + off, sizeof buf - off, "%s%s->%s%s", i ? " " : "", names[i], obj,
                        next == global ? "" : "(differs-from-global)");
    }
    return buf;
}
