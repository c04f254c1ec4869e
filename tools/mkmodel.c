/* tools/mkmodel.c - placeholder until sniper-mkmodel lands. */
#include <stdio.h>
int main(void) {
    fprintf(stderr, "sniper-mkmodel: not built yet\n");
    return 2;
}
