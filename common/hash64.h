/* hash64.h - a 64-bit non-cryptographic hash, XXH64 as its published specification defines it
 * (written here from the spec; golden values in tests/test_ctxfile.c), one-shot or streamed.
 * Used for context files: the model fingerprint and the checksums.
 *
 *     struct hash64 h; hash64_init(&h, 0);
 *     hash64_update(&h, buf, n); ...
 *     uint64_t d = hash64_digest(&h);     // the same as hash64(all bytes, 0)
 */
#ifndef SNIPER_HASH64_H
#define SNIPER_HASH64_H

#include <stddef.h>
#include <stdint.h>

struct hash64 {
    uint64_t acc[4];      /* the four lanes */
    uint64_t seed;
    uint64_t total_bytes; /* bytes fed so far */
    uint8_t buf[32];      /* a partial stripe */
    size_t n_buf;         /* bytes in buf */
};

void hash64_init(struct hash64 *h, uint64_t seed);
void hash64_update(struct hash64 *h, const void *data, size_t n);
/* The hash of every byte fed so far; h may keep being fed. */
uint64_t hash64_digest(const struct hash64 *h);
/* One-shot. */
uint64_t hash64(const void *data, size_t n, uint64_t seed);

#endif
