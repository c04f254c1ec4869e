/* test_response_store.c - the Responses API's bounded store: copies in and out, replace and
 * delete, the oldest dropped first past the count or byte bound, an entry larger than the byte
 * bound refused, entries gone after their time. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "response_store.h"

static void test_put_get_delete(void) {
    struct response_store *s = response_store_new(8, 1 << 20, 3600);
    char body[] = "{\"id\":\"r1\"}", *b = NULL, *it = NULL;
    CHECK(s != NULL);
    CHECK(response_store_put(s, "r1", body, "[1]") == 0);
    body[2] = 'X'; /* the store holds its own copy */
    CHECK(response_store_get(s, "r1", &b, &it) == 0);
    CHECK(b && strcmp(b, "{\"id\":\"r1\"}") == 0 && it && strcmp(it, "[1]") == 0);
    free(b), free(it);
    CHECK(response_store_put(s, "r1", "{}", "[2]") == 0); /* the same id replaces */
    CHECK(response_store_count(s) == 1);
    CHECK(response_store_get(s, "r1", NULL, &it) == 0 && strcmp(it, "[2]") == 0);
    free(it);
    CHECK(response_store_get(s, "nope", &b, NULL) == -ENOENT && b == NULL);
    CHECK(response_store_delete(s, "r1") == 0);
    CHECK(response_store_delete(s, "r1") == -ENOENT);
    CHECK(response_store_get(s, "r1", &b, NULL) == -ENOENT);
    response_store_free(s);
    response_store_free(NULL);
}

static void test_bounds(void) {
    struct response_store *s = response_store_new(3, 100, 3600);
    char id[16];
    for (int i = 0; i < 5; i++) {
        snprintf(id, sizeof(id), "r%d", i);
        CHECK(response_store_put(s, id, "0123456789", "[]") == 0);
    }
    CHECK(response_store_count(s) == 3); /* r0 and r1 dropped, oldest first */
    CHECK(response_store_get(s, "r1", NULL, NULL) == -ENOENT);
    CHECK(response_store_get(s, "r2", NULL, NULL) == 0);
    char big[101];
    memset(big, 'x', 100);
    big[100] = '\0';
    CHECK(response_store_put(s, "huge", big, "[]") == -E2BIG); /* 102 bytes alone */
    CHECK(response_store_count(s) == 3);
    big[80] = '\0';
    CHECK(response_store_put(s, "r9", big, "[]") == 0); /* 82 bytes: r2 and r3 make room */
    CHECK(response_store_count(s) == 2 && response_store_get(s, "r9", NULL, NULL) == 0);
    CHECK(response_store_get(s, "r3", NULL, NULL) == -ENOENT);
    CHECK(response_store_get(s, "r4", NULL, NULL) == 0);
    response_store_free(s);
}

static void test_expiry(void) {
    struct response_store *s = response_store_new(8, 1 << 20, 0.05);
    CHECK(response_store_put(s, "old", "{}", "[]") == 0);
    CHECK(response_store_get(s, "old", NULL, NULL) == 0);
    nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
    CHECK(response_store_get(s, "old", NULL, NULL) == -ENOENT);
    CHECK(response_store_count(s) == 0);
    response_store_free(s);
}

static const struct test_case cases[] = {
    {"put_get_delete", test_put_get_delete},
    {"bounds", test_bounds},
    {"expiry", test_expiry},
    {0},
};

int main(int argc, char **argv) { return test_run(argc, argv, cases); }
