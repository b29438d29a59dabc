#include <stdio.h>
const char *which(void);
int main(void) { printf("%s\n", which()); return 0; }
