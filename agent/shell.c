/* shell.c - see shell.h. One private uv loop per command; a 20 ms timer polls the cancel flag and
 * the deadline. After the process exits the pipes get a short grace period to drain, so a
 * background grandchild holding them open cannot hang the agent. */
#include "shell.h"
#include "err.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define SHELL_POLL_MS 20
#define SHELL_DRAIN_MS 200

struct shell_run {
    uv_loop_t loop;
    uv_process_t proc;
    uv_pipe_t out, errp;
    uv_timer_t timer;
    struct shell_result *r;
    size_t cap;
    volatile sig_atomic_t *cancel;
    uint64_t deadline_ms, exit_ms;   /* loop times; exit_ms 0 until the process exited */
    int open_pipes;
    bool exited, killed;
    char buf[16384];
};

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    struct shell_run *s = h->data;
    *buf = uv_buf_init(s->buf, sizeof(s->buf));
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
    struct shell_run *s = st->data;
    struct shell_result *r = s->r;
    if (n < 0) {
        if (!uv_is_closing((uv_handle_t *)st)) {
            uv_close((uv_handle_t *)st, NULL);
            s->open_pipes--;
        }
        return;
    }
    size_t keep = (size_t)n;
    if (r->output_bytes + keep > s->cap) {
        keep = s->cap - r->output_bytes;
        r->truncated = true;
    }
    memcpy(r->output + r->output_bytes, buf->base, keep);
    r->output_bytes += keep;
    r->output[r->output_bytes] = '\0';
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig) {
    struct shell_run *s = p->data;
    s->r->exit_status = (long)status;
    s->r->term_signal = sig;
    s->exited = true;
    s->exit_ms = uv_now(&s->loop);
    uv_close((uv_handle_t *)p, NULL);
}

/* Kills the command's whole process group. */
static void shell_kill(struct shell_run *s) {
    if (!s->killed && !s->exited)
        uv_kill(-s->proc.pid, SIGKILL);
    s->killed = true;
}

static void close_pipe(struct shell_run *s, uv_pipe_t *p) {
    if (!uv_is_closing((uv_handle_t *)p)) {
        uv_close((uv_handle_t *)p, NULL);
        s->open_pipes--;
    }
}

static void on_tick(uv_timer_t *t) {
    struct shell_run *s = t->data;
    uint64_t now = uv_now(&s->loop);
    if (!s->exited && s->cancel && *s->cancel) {
        s->r->cancelled = true;
        shell_kill(s);
    }
    if (!s->exited && s->deadline_ms && now >= s->deadline_ms) {
        s->r->timed_out = true;
        shell_kill(s);
    }
    if (s->exited && now >= s->exit_ms + SHELL_DRAIN_MS) {
        close_pipe(s, &s->out);
        close_pipe(s, &s->errp);
    }
    if (s->exited && s->open_pipes == 0)
        uv_close((uv_handle_t *)t, NULL);
}

/* Spawns cmd with the pipes wired. Returns 0 or a libuv error. */
static int shell_spawn(struct shell_run *s, const char *cmd) {
    char *args[] = { "/bin/sh", "-c", (char *)cmd, NULL };
    uv_stdio_container_t stdio[3] = {
        { .flags = UV_IGNORE },
        { .flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&s->out },
        { .flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&s->errp },
    };
    uv_process_options_t o = {
        .exit_cb = on_exit_cb, .file = "/bin/sh", .args = args,
        .flags = UV_PROCESS_DETACHED, .stdio_count = 3, .stdio = stdio,
    };
    s->proc.data = s;
    return uv_spawn(&s->loop, &s->proc, &o);
}

int shell_run(const char *cmd, double timeout_s, size_t output_cap, volatile sig_atomic_t *cancel,
              struct shell_result *r, char *err, size_t err_len) {
    memset(r, 0, sizeof(*r));
    struct shell_run *s = calloc(1, sizeof(*s));
    int rc = -ENOMEM;
    if (!s || !(r->output = malloc(output_cap + 1))) {
        err_set(err, err_len, "out of memory");
        goto out;
    }
    r->output[0] = '\0';
    s->r = r;
    s->cap = output_cap;
    s->cancel = cancel;
    if ((rc = uv_loop_init(&s->loop)) < 0) {
        err_set(err, err_len, "cannot start an event loop: %s", uv_strerror(rc));
        goto out;
    }
    uv_pipe_init(&s->loop, &s->out, 0);
    uv_pipe_init(&s->loop, &s->errp, 0);
    uv_timer_init(&s->loop, &s->timer);
    s->out.data = s->errp.data = s->timer.data = s;
    s->open_pipes = 2;
    uint64_t t0 = uv_now(&s->loop);
    s->deadline_ms = timeout_s > 0 ? t0 + (uint64_t)(timeout_s * 1000) : 0;
    if ((rc = shell_spawn(s, cmd)) < 0) {
        err_set(err, err_len, "cannot run \"%s\": %s", cmd, uv_strerror(rc));
        close_pipe(s, &s->out);
        close_pipe(s, &s->errp);
        uv_close((uv_handle_t *)&s->timer, NULL);
        uv_close((uv_handle_t *)&s->proc, NULL);
    } else {
        uv_read_start((uv_stream_t *)&s->out, on_alloc, on_read);
        uv_read_start((uv_stream_t *)&s->errp, on_alloc, on_read);
        uv_timer_start(&s->timer, on_tick, SHELL_POLL_MS, SHELL_POLL_MS);
    }
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_update_time(&s->loop);
    r->seconds = (double)(uv_now(&s->loop) - t0) / 1000.0;
    uv_loop_close(&s->loop);
out:
    free(s);
    return rc;
}

void shell_result_release(struct shell_result *r) {
    if (!r)
        return;
    free(r->output);
    memset(r, 0, sizeof(*r));
}
