/* Defines which(): the symbol a preloaded library reaches with dlsym(RTLD_NEXT). */
const char *which(void) { return "base"; }
