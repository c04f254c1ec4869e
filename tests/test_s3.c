/* test_s3.c - the S3 client (server/context/s3). Without arguments: the offline parts (URI
 * encoding, the ListObjectsV2 and <Error> parsers, configuration from the environment). With
 * --live (tests/s3.sh runs it against a local moto_server, SNIPER_S3_* set): upload, head, list,
 * download and compare bytes, progress counters, delete, a missing key, a wrong secret and a wrong
 * access key refused with the store's code, and a context file's trip through the store. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctxfile.h"
#include "harness.h"
#include "s3.h"

static void test_uri_encode(void) {
    char out[64];
    CHECK(s3_uri_encode("kv-cache/a.b_c~d", true, out, sizeof(out)) == 0);
    CHECK_STR(out, "kv-cache/a.b_c~d");
    CHECK(s3_uri_encode("kv-cache/a b+c", false, out, sizeof(out)) == 0);
    CHECK_STR(out, "kv-cache%2Fa%20b%2Bc");
    CHECK(s3_uri_encode("\xc3\xa9", false, out, sizeof(out)) == 0);
    CHECK_STR(out, "%C3%A9");
    CHECK(s3_uri_encode("abcdef", false, out, 6) == -ENAMETOOLONG);
}

static void test_parse_list(void) {
    const char *page1 =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>b</Name>"
        "<Prefix>kv-cache/</Prefix><KeyCount>2</KeyCount><IsTruncated>true</IsTruncated>"
        "<Contents><Key>kv-cache/one</Key><LastModified>2026-11-22T15:31:48.000Z</LastModified>"
        "<ETag>\"x\"</ETag><Size>123456789012</Size></Contents>"
        "<Contents><Key>kv-cache/two &amp; three</Key><Size>0</Size></Contents>"
        "<NextContinuationToken>tok/1+=</NextContinuationToken></ListBucketResult>";
    const char *page2 = "<ListBucketResult><Contents><Key>kv-cache/z</Key><Size>7</Size>"
                        "</Contents><IsTruncated>false</IsTruncated></ListBucketResult>";
    struct s3_list l = {0};
    bool more = false;
    CHECK(s3_parse_list(page1, strlen(page1), &l, &more) == 0);
    CHECK(more);
    CHECK(s3_parse_list(page2, strlen(page2), &l, &more) == 0);
    CHECK(!more);
    CHECK_EQ_INT(l.n, 3);
    if (l.n == 3) {
        CHECK_STR(l.objects[0].key, "kv-cache/one");
        CHECK(l.objects[0].bytes == 123456789012ull);
        CHECK_STR(l.objects[0].last_modified, "2026-11-22T15:31:48.000Z");
        CHECK_STR(l.objects[1].key, "kv-cache/two & three");
        CHECK_STR(l.objects[2].key, "kv-cache/z");
        CHECK_EQ_INT(l.objects[2].bytes, 7);
    }
    const char *bad[] = {"", "<Error/>", "<ListBucketResult><Contents><Size>1</Size></Contents>"
                         "</ListBucketResult>", "<ListBucketResult><Contents>", "\x01\x02"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct s3_list b = {0};
        CHECK_MSG(s3_parse_list(bad[i], strlen(bad[i]), &b, &more) == -EIO,
                  "bad list %zu accepted", i);
        s3_list_release(&b);
    }
    s3_list_release(&l);
    s3_list_release(NULL);
}

static void test_parse_error(void) {
    const char *x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SignatureDoesNotMatch"
                    "</Code><Message>The request signature we calculated does not match the "
                    "signature you provided.</Message><RequestId>1</RequestId></Error>";
    struct s3_status st = {0};
    s3_parse_error(x, strlen(x), &st);
    CHECK_STR(st.code, "SignatureDoesNotMatch");
    CHECK(strncmp(st.message, "The request signature", 21) == 0);
    s3_parse_error("not xml", 7, &st);
    CHECK_STR(st.code, "");
    s3_parse_error("<ListBucketResult/>", 19, &st);
    CHECK_STR(st.code, "");
}

static void test_config_env(void) {
    const char *names[] = {"SNIPER_S3_ENDPOINT", "SNIPER_S3_BUCKET", "SNIPER_S3_ACCESS_KEY",
                           "SNIPER_S3_SECRET_KEY", "SNIPER_S3_REGION", "R2_ENDPOINT", "R2_BUCKET",
                           "R2_ACCESS_KEY", "R2_SECRET_KEY"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        unsetenv(names[i]);
    struct s3_config c = {0};
    CHECK_EQ_INT(s3_config_from_env(&c), -ENOENT);
    CHECK_STR(c.region, "auto");
    setenv("R2_ENDPOINT", "https://acct.r2.cloudflarestorage.com", 1);
    setenv("R2_BUCKET", "seed", 1);
    setenv("R2_ACCESS_KEY", "AK", 1);
    setenv("R2_SECRET_KEY", "SK", 1);
    setenv("SNIPER_S3_BUCKET", "ours", 1);
    memset(&c, 0, sizeof(c));
    snprintf(c.secret_key, sizeof(c.secret_key), "from-config");
    CHECK_EQ_INT(s3_config_from_env(&c), 0);
    CHECK_STR(c.endpoint, "https://acct.r2.cloudflarestorage.com");
    CHECK_STR(c.bucket, "ours");
    CHECK_STR(c.access_key, "AK");
    CHECK_STR(c.secret_key, "from-config");
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        unsetenv(names[i]);
}

/* ---- live, against the store in SNIPER_S3_* ------------------------------------------------- */

static struct s3_config live_config(void) {
    struct s3_config c = {0};
    if (s3_config_from_env(&c) < 0)
        test_fail(__FILE__, __LINE__, "SNIPER_S3_* not set: run tests/s3.sh");
    return c;
}

static void test_live_roundtrip(void) {
    struct s3_config c = live_config();
    char err[512], up[1024], down[1024];
    size_t n = (3u << 20) + 12345, got_n = 0;
    uint8_t *data = malloc(n);
    for (size_t i = 0; i < n; i++)
        data[i] = (uint8_t)(i * 2654435761u >> 13);
    snprintf(up, sizeof(up), "%s/up.bin", test_tmpdir());
    snprintf(down, sizeof(down), "%s/down.bin", test_tmpdir());
    CHECK(test_write_file(up, data, n) == 0);
    struct s3_progress p = {0};
    struct s3_status st;
    CHECK_MSG(s3_put_file(&c, "kv-cache/big one", up, &p, &st, err, sizeof(err)) == 0, "%s", err);
    CHECK_EQ_INT(st.http_status, 200);
    CHECK(atomic_load(&p.done_bytes) == n && atomic_load(&p.total_bytes) == n);
    CHECK_MSG(s3_put_file(&c, "kv-cache/small", up, NULL, NULL, err, sizeof(err)) == 0, "%s", err);
    CHECK(s3_put_file(&c, "elsewhere/x", up, NULL, NULL, err, sizeof(err)) == 0);
    uint64_t bytes = 0;
    CHECK_MSG(s3_head(&c, "kv-cache/big one", &bytes, &st, err, sizeof(err)) == 0, "%s", err);
    CHECK(bytes == n);
    CHECK_EQ_INT(s3_head(&c, "kv-cache/absent", &bytes, &st, err, sizeof(err)), -ENOENT);
    CHECK_EQ_INT(st.http_status, 404);
    struct s3_list l;
    CHECK_MSG(s3_list(&c, S3_CONTEXT_PREFIX, &l, &st, err, sizeof(err)) == 0, "%s", err);
    CHECK_EQ_INT(l.n, 2);
    for (size_t i = 0; i < l.n; i++) {
        printf("listed %s %llu %s\n", l.objects[i].key, (unsigned long long)l.objects[i].bytes,
               l.objects[i].last_modified);
        CHECK(l.objects[i].bytes == n);
    }
    s3_list_release(&l);
    struct s3_config paged = c; /* one key a page: pages chained by start-after */
    paged.list_page_keys = 1;
    CHECK_MSG(s3_list(&paged, "", &l, &st, err, sizeof(err)) == 0, "%s", err);
    CHECK_EQ_INT(l.n, 3);
    if (l.n == 3)
        CHECK_STR(l.objects[2].key, "kv-cache/small");
    s3_list_release(&l);
    memset(&p, 0, sizeof(p));
    atomic_store(&p.cancel, true);
    CHECK_EQ_INT(s3_get_file(&c, "kv-cache/big one", down, &p, &st, err, sizeof(err)),
                 -ECANCELED);
    CHECK_MSG(access(down, F_OK) != 0, "a cancelled download left \"%s\"", down);
    memset(&p, 0, sizeof(p));
    CHECK_MSG(s3_get_file(&c, "kv-cache/big one", down, &p, &st, err, sizeof(err)) == 0, "%s",
              err);
    uint8_t *got = test_read_file(down, &got_n);
    CHECK(got && got_n == n && memcmp(got, data, n) == 0);
    CHECK(atomic_load(&p.done_bytes) == n);
    free(got);
    /* an existing destination is refused (exclusive create) and left alone */
    CHECK_EQ_INT(s3_get_file(&c, "kv-cache/small", down, NULL, NULL, err, sizeof(err)), -EEXIST);
    unlink(down);
    CHECK_EQ_INT(s3_get_file(&c, "kv-cache/absent", down, NULL, &st, err, sizeof(err)), -ENOENT);
    CHECK_MSG(access(down, F_OK) != 0, "a failed download left \"%s\"", down);
    printf("missing key: %s\n", err);
    CHECK(s3_delete(&c, "kv-cache/big one", &st, err, sizeof(err)) == 0);
    CHECK(s3_delete(&c, "kv-cache/small", &st, err, sizeof(err)) == 0);
    CHECK(s3_delete(&c, "elsewhere/x", &st, err, sizeof(err)) == 0);
    CHECK(s3_list(&c, S3_CONTEXT_PREFIX, &l, &st, err, sizeof(err)) == 0 && l.n == 0);
    s3_list_release(&l);
    free(data);
}

static void test_live_wrong_secret(void) {
    struct s3_config c = live_config();
    char err[512], up[1024];
    struct s3_status st;
    snprintf(up, sizeof(up), "%s/tiny.bin", test_tmpdir());
    CHECK(test_write_file(up, "hello", 5) == 0);
    struct s3_config bad = c;
    snprintf(bad.secret_key, sizeof(bad.secret_key), "not-the-secret");
    CHECK_EQ_INT(s3_put_file(&bad, "kv-cache/x", up, NULL, &st, err, sizeof(err)), -EACCES);
    CHECK_EQ_INT(st.http_status, 403);
    CHECK_STR(st.code, "SignatureDoesNotMatch");
    CHECK(strstr(err, "SignatureDoesNotMatch") != NULL && strstr(err, "403") != NULL);
    printf("wrong secret: %s\n", err);
    bad = c;
    snprintf(bad.access_key, sizeof(bad.access_key), "AKIANOSUCHKEY0000000");
    struct s3_list l;
    CHECK_EQ_INT(s3_list(&bad, S3_CONTEXT_PREFIX, &l, &st, err, sizeof(err)), -EACCES);
    CHECK_STR(st.code, "InvalidAccessKeyId");
    printf("wrong access key: %s\n", err);
    bad = c;
    snprintf(bad.endpoint, sizeof(bad.endpoint), "http://127.0.0.1:1");
    CHECK_EQ_INT(s3_delete(&bad, "kv-cache/x", &st, err, sizeof(err)), -EIO);
    CHECK_EQ_INT(st.http_status, 0);
    printf("no store: %s\n", err);
}

/* A context file through the store: upload, delete locally, download to a temp name, verify,
 * rename; what POST /v1/context/upload and /download do. */
static void test_live_context(void) {
    struct s3_config c = live_config();
    char model[1024], err[512], path[1100], tmp[1100];
    if (test_make_model(model, sizeof(model), "s3.gguf", "--preset tiny --seed 3") < 0)
        return;
    struct model *m = model_load(model, err, sizeof(err));
    struct engine_params ep = engine_params_default();
    ep.n_ctx = 64;
    ep.n_threads = 2;
    struct engine *e = m ? engine_new(m, &ep, err, sizeof(err)) : NULL;
    int32_t ids[16], *got = NULL, n = 0;
    for (int i = 0; i < 16; i++)
        ids[i] = (i * 37) % m->hp.n_vocab;
    CHECK(e && engine_eval(e, 0, ids, 16, NULL, false) == 0);
    snprintf(path, sizeof(path), "%s/review", test_tmpdir());
    snprintf(tmp, sizeof(tmp), "%s/.review.download", test_tmpdir());
    struct ctxfile_opts o = {.store = CTXFILE_STORE_Q8_0, .zstd = true};
    CHECK(ctxfile_save(path, m, e, 0, ids, 16, "{\"prompt\":\"x\"}", &o, NULL, err, sizeof(err)) == 0);
    CHECK_MSG(s3_put_file(&c, S3_CONTEXT_PREFIX "review", path, NULL, NULL, err, sizeof(err)) == 0,
              "%s", err);
    unlink(path);
    CHECK(s3_get_file(&c, S3_CONTEXT_PREFIX "review", tmp, NULL, NULL, err, sizeof(err)) == 0);
    struct ctxfile_info in;
    CHECK_MSG(ctxfile_info(tmp, &in, NULL, err, sizeof(err)) == 0, "%s", err);
    CHECK(rename(tmp, path) == 0);
    char *meta = NULL;
    struct engine *e2 = engine_new(m, &ep, err, sizeof(err));
    CHECK_MSG(ctxfile_load(path, m, e2, 0, &got, &n, &meta, NULL, err, sizeof(err)) == 0, "%s", err);
    CHECK(n == 16 && got && memcmp(got, ids, sizeof(ids)) == 0);
    CHECK(s3_delete(&c, S3_CONTEXT_PREFIX "review", NULL, err, sizeof(err)) == 0);
    free(got);
    free(meta);
    engine_free(e2);
    engine_free(e);
    model_free(m);
}

static const struct test_case cases[] = {
    {"uri_encode", test_uri_encode},
    {"parse_list", test_parse_list},
    {"parse_error", test_parse_error},
    {"config_env", test_config_env},
    {0},
};

static const struct test_case live_cases[] = {
    {"live_roundtrip", test_live_roundtrip},
    {"live_wrong_secret", test_live_wrong_secret},
    {"live_context", test_live_context},
    {0},
};

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--live") == 0) {
        argv[1] = argv[0];
        return test_run(argc - 1, argv + 1, live_cases);
    }
    return test_run(argc, argv, cases);
}
