/* Preloaded after the shim: interposes which() and finds the next definition with
 * dlsym(RTLD_NEXT). glibc answers relative to the caller, so this must find next_base's
 * which(), not its own (which would recurse), with or without the shim in front. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

const char *which(void) {
    static char buf[64];
    const char *(*next)(void) = (const char *(*)(void))dlsym(RTLD_NEXT, "which");
    if (!next) return "probe>NULL";
    if (next == which) return "probe>SELF";
    snprintf(buf, sizeof buf, "probe>%s", next());
    return buf;
}
