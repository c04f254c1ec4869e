/* tools/goldens/xxh64.c - prints the XXH64 (seed 0) of each file named, as tests/golden/corpus.txt
 * records a generated model's: `xxh64 FILE...` -> "0123456789abcdef  FILE" lines. Built by
 * tools/goldens/make.sh from common/hash64.c. */
#include <stdio.h>

#include "hash64.h"

int main(int argc, char **argv) {
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            perror(argv[i]);
            rc = 1;
            continue;
        }
        struct hash64 h;
        hash64_init(&h, 0);
        char buf[1 << 16];
        size_t n;
        while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
            hash64_update(&h, buf, n);
        if (ferror(f))
            rc = 1;
        fclose(f);
        printf("%016llx  %s\n", (unsigned long long)hash64_digest(&h), argv[i]);
    }
    return rc;
}
