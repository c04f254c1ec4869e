/* server/main.c - placeholder until the one-shot CLI lands. */
#include <stdio.h>
int main(void) {
    fprintf(stderr, "sniperd: not built yet\n");
    return 2;
}
