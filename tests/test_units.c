/* test_units.c - numbers from command lines (common/units.h): sizes with their suffixes, whole
 * counts within their bounds, and what each refuses (trailing text, fractions, out of range)
 * without touching the output. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "units.h"

static void test_bytes(void) {
    static const struct {
        const char *s;
        uint64_t want;
    } ok[] = {
        {"4096", 4096}, {"4K", 4096}, {"2592K", 2592ull << 10}, {"512M", 512ull << 20},
        {"4G", 4ull << 30}, {"4GiB", 4ull << 30}, {"4GB", 4ull << 30}, {"1.5G", 3ull << 29},
        {"2T", 2ull << 40}, {"3m", 3ull << 20},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        uint64_t v = 0;
        CHECK_MSG(units_parse_bytes(ok[i].s, &v) == 0 && v == ok[i].want,
                  "\"%s\": %llu, want %llu", ok[i].s, (unsigned long long)v,
                  (unsigned long long)ok[i].want);
    }
    static const char *const bad[] = {"", "G", "0", "-4G", "4X", "4GiBs", "4 G", "1e19", "nan"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t v = 7;
        CHECK_MSG(units_parse_bytes(bad[i], &v) == -EINVAL && v == 7, "\"%s\" taken as %llu",
                  bad[i], (unsigned long long)v);
    }
}

static void test_int(void) {
    static const struct {
        const char *s;
        long long lo, hi, want;
    } ok[] = {
        {"0", 0, 10, 0},       {"10", 0, 10, 10},   {"-1", -1, 5, -1},  {"+7", 0, 10, 7},
        {"007", 0, 10, 7},     {"512", 1, 4096, 512},
        {"9223372036854775807", 0, INT64_MAX, INT64_MAX},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        long long v = 0;
        CHECK_MSG(units_parse_int(ok[i].s, ok[i].lo, ok[i].hi, &v) == 0 && v == ok[i].want,
                  "\"%s\": %lld, want %lld", ok[i].s, v, ok[i].want);
    }
    static const struct {
        const char *s;
        long long lo, hi;
    } bad[] = {
        {"", 0, 10},   {"-", 0, 10},   {"11", 0, 10},  {"-2", -1, 10}, {"12x", 0, 100},
        {"1.5", 0, 10}, {"4K", 0, 1 << 20}, {"0x10", 0, 100}, {"5 ", 0, 10},
        {"9223372036854775808", 0, INT64_MAX}, {"abc", 0, 10},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        long long v = 42;
        CHECK_MSG(units_parse_int(bad[i].s, bad[i].lo, bad[i].hi, &v) == -EINVAL && v == 42,
                  "\"%s\" in [%lld, %lld] taken as %lld", bad[i].s, bad[i].lo, bad[i].hi, v);
    }
}

static const struct test_case cases[] = {
    {"bytes", test_bytes},
    {"int", test_int},
    {0},
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
