/* A program that never touches CUDA, but does use dlsym for ordinary symbols. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    size_t (*len)(const char *) = (size_t (*)(const char *))dlsym(RTLD_DEFAULT, "strlen");
    printf("strlen=%zu\n", len ? len("seedance") : 0);
    return 0;
}
