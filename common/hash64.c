/* hash64.c - XXH64 (see hash64.h): stripes of 32 bytes into four lanes, then a merge and an
 * avalanche. Reads are little-endian whatever the host. */
#include "hash64.h"

#include <string.h>

#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull
#define P4 0x85EBCA77C2B2AE63ull
#define P5 0x27D4EB2F165667C5ull

static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static uint64_t rd64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t round64(uint64_t acc, uint64_t v) { return rotl(acc + v * P2, 31) * P1; }

static uint64_t merge64(uint64_t acc, uint64_t lane) { return (acc ^ round64(0, lane)) * P1 + P4; }

static void stripe(uint64_t acc[4], const uint8_t *p) {
    for (int i = 0; i < 4; i++)
        acc[i] = round64(acc[i], rd64(p + 8 * i));
}

void hash64_init(struct hash64 *h, uint64_t seed) {
    memset(h, 0, sizeof(*h));
    h->seed = seed;
    h->acc[0] = seed + P1 + P2;
    h->acc[1] = seed + P2;
    h->acc[2] = seed;
    h->acc[3] = seed - P1;
}

void hash64_update(struct hash64 *h, const void *data, size_t n) {
    const uint8_t *p = data;
    h->total_bytes += n;
    if (h->n_buf) {
        size_t take = 32 - h->n_buf < n ? 32 - h->n_buf : n;
        memcpy(h->buf + h->n_buf, p, take);
        h->n_buf += take;
        p += take;
        n -= take;
        if (h->n_buf < 32)
            return;
        stripe(h->acc, h->buf);
        h->n_buf = 0;
    }
    for (; n >= 32; p += 32, n -= 32)
        stripe(h->acc, p);
    memcpy(h->buf, p, n);
    h->n_buf = n;
}

uint64_t hash64_digest(const struct hash64 *h) {
    uint64_t a;
    if (h->total_bytes >= 32) {
        const uint64_t *v = h->acc;
        a = rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18);
        for (int i = 0; i < 4; i++)
            a = merge64(a, v[i]);
    } else {
        a = h->seed + P5;
    }
    a += h->total_bytes;
    const uint8_t *p = h->buf;
    size_t n = h->n_buf;
    for (; n >= 8; p += 8, n -= 8)
        a = rotl(a ^ round64(0, rd64(p)), 27) * P1 + P4;
    if (n >= 4) {
        a = rotl(a ^ (uint64_t)rd32(p) * P1, 23) * P2 + P3;
        p += 4;
        n -= 4;
    }
    for (; n > 0; p++, n--)
        a = rotl(a ^ (uint64_t)*p * P5, 11) * P1;
    a ^= a >> 33;
    a *= P2;
    a ^= a >> 29;
    a *= P3;
    a ^= a >> 32;
    return a;
}

uint64_t hash64(const void *data, size_t n, uint64_t seed) {
    struct hash64 h;
    hash64_init(&h, seed);
    hash64_update(&h, data, n);
    return hash64_digest(&h);
}
