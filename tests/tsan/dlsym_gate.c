/* Test-only preload for running the TSan-instrumented shim (scripts/ci/race-check.sh).
 *
 * The TSan runtime resolves its interceptors with dlsym(RTLD_NEXT, ..) while it initialises,
 * before its thread state exists. With the shim preloaded, those calls reach the shim's
 * exported dlsym, whose (instrumented) Rust hook then crashes the runtime. Preloaded in front
 * of the shim, this library's dlsym sends calls to glibc's dlsym until its constructor has run
 * (the runtime initialises from the executable's .preinit_array, before any constructor), and
 * to the shim's dlsym afterwards. Like the shim's, it is a tail jump: the caller's return
 * address stays on the stack, so RTLD_NEXT still resolves relative to the real caller. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

static void *glibc_dlsym, *shim_dlsym;
static int open_gate;

void *dlsym_gate_target(void) {
    if (!glibc_dlsym) {
        glibc_dlsym = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!glibc_dlsym) glibc_dlsym = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    }
    return open_gate && shim_dlsym ? shim_dlsym : glibc_dlsym;
}

__attribute__((constructor)) static void gate_open(void) {
    void *(*real)(void *, const char *) = dlsym_gate_target();
    shim_dlsym = real(RTLD_NEXT, "dlsym"); /* the next dlsym after this library: the shim's */
    open_gate = 1;
}

__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        "  push %rdi\n"
        "  push %rsi\n"
        "  sub $8, %rsp\n"
        "  call dlsym_gate_target\n"
        "  add $8, %rsp\n"
        "  pop %rsi\n"
        "  pop %rdi\n"
        "  jmp *%rax\n"
        ".size dlsym, .-dlsym\n");
