/* test_agent_shell.c - the libuv command runner (agent/shell.c): output and exit status, stderr
 * collected, the output cap, the timeout killing the whole process group, the cancel flag, a
 * background child that keeps the pipe open, stdin at end of file. */
#include "harness.h"
#include "shell.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void test_output_and_status(void) {
    struct shell_result r;
    char err[256] = "";
    CHECK_EQ_INT(shell_run("echo out; echo err >&2; exit 3", 5, 1000, NULL, &r, err, sizeof(err)),
                 0);
    CHECK_EQ_INT(r.exit_status, 3);
    CHECK_EQ_INT(r.term_signal, 0);
    CHECK(strstr(r.output, "out\n") && strstr(r.output, "err\n"));
    CHECK(!r.timed_out && !r.truncated && !r.cancelled);
    shell_result_release(&r);
    CHECK_EQ_INT(shell_run("cat; echo done", 5, 1000, NULL, &r, err, sizeof(err)), 0);
    CHECK_STR(r.output, "done\n");   /* stdin is /dev/null: cat ends at once */
    shell_result_release(&r);
}

static void test_cap(void) {
    struct shell_result r;
    char err[256] = "";
    CHECK_EQ_INT(shell_run("head -c 100000 /dev/zero | tr '\\0' a", 5, 1000, NULL, &r, err,
                           sizeof(err)), 0);
    CHECK_EQ_INT(r.output_bytes, 1000);
    CHECK_EQ_INT(strlen(r.output), 1000);
    CHECK(r.truncated);
    CHECK_EQ_INT(r.exit_status, 0);
    shell_result_release(&r);
}

static void test_timeout_kills_group(void) {
    struct shell_result r;
    char err[256] = "", cmd[600], marker[512];
    snprintf(marker, sizeof(marker), "%s/late-marker", test_tmpdir());
    snprintf(cmd, sizeof(cmd), "(sleep 1; touch %s) & sleep 10", marker);
    CHECK_EQ_INT(shell_run(cmd, 0.3, 1000, NULL, &r, err, sizeof(err)), 0);
    CHECK(r.timed_out);
    CHECK(r.seconds < 2);
    CHECK_EQ_INT(r.term_signal, 9);
    shell_result_release(&r);
    usleep(1300 * 1000);
    CHECK_MSG(access(marker, F_OK) != 0, "the background child survived the timeout");
}

static void test_cancel(void) {
    struct shell_result r;
    volatile sig_atomic_t cancel = 1;
    char err[256] = "";
    CHECK_EQ_INT(shell_run("sleep 10", 0, 1000, &cancel, &r, err, sizeof(err)), 0);
    CHECK(r.cancelled);
    CHECK(r.seconds < 2);
    shell_result_release(&r);
}

static void test_background_holder(void) {
    struct shell_result r;
    char err[256] = "";
    /* the shell exits at once, its child keeps stdout open: the runner must not wait for it */
    CHECK_EQ_INT(shell_run("echo hi; sleep 3 &", 10, 1000, NULL, &r, err, sizeof(err)), 0);
    CHECK(r.seconds < 2);
    CHECK(strstr(r.output, "hi") != NULL);
    shell_result_release(&r);
    shell_result_release(NULL);
}

static const struct test_case cases[] = {
    { "output_and_status", test_output_and_status },
    { "cap", test_cap },
    { "timeout_kills_group", test_timeout_kills_group },
    { "cancel", test_cancel },
    { "background_holder", test_background_holder },
    { 0 },
};

int main(int argc, char **argv) {
    return test_run(argc, argv, cases);
}
