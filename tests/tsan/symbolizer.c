/* Static stand-in for llvm-symbolizer (scripts/ci/race-check.sh). The TSan runtime starts the
 * symbolizer as a child process, which inherits LD_PRELOAD; the TSan-instrumented shim cannot
 * load into a process without the TSan runtime. Linked statically, this wrapper ignores
 * LD_PRELOAD, removes it, and runs the real symbolizer. */
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    (void)argc;
    unsetenv("LD_PRELOAD");
    argv[0] = (char *)"/usr/bin/llvm-symbolizer";
    execv(argv[0], argv);
    return 127;
}
