/* api_call.c - the one request runner every API route shares: a call holds a scheduler job on a
 * model, splits its text into content, reasoning and tool calls (chat.c) for the route's hooks,
 * and either streams the reply or waits for the job's end while watching the client.
 * Invariants: a call is referenced by its handler until api_call_unref, by its job until the
 * done hook has run, and by its stream's gone hook until the reply is destroyed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"
#include "clock.h"
#include "strbuf.h"

static void call_on_token(void *ctx, const struct job_token *tok) {
    struct api_call *ac = ctx;
    if (ac->ops->token)
        ac->ops->token(ac->ctx, tok);
}

static void call_on_text(void *ctx, const char *text, size_t len, const struct job_token *tok) {
    struct api_call *ac = ctx;
    if (ac->ops->text)
        ac->ops->text(ac->ctx, text, len, tok);
    else
        api_call_feed(ac, text, len);
}

static void call_on_done(void *ctx, const struct job_summary *s) {
    struct api_call *ac = ctx;
    ac->ops->done(ac->ctx, s);
    if (ac->out)
        http_stream_close(ac->out);
    pthread_mutex_lock(&ac->mu);
    ac->done = true;
    pthread_cond_broadcast(&ac->cv);
    pthread_mutex_unlock(&ac->mu);
    api_call_unref(ac);
}

static void call_on_gone(void *ctx) {
    struct api_call *ac = ctx;
    job_cancel(ac->job);
    api_call_unref(ac);
}

void api_call_init(struct api_call *ac, struct api *a, const struct api_call_ops *ops, void *ctx) {
    memset(ac, 0, sizeof(*ac));
    ac->api = a;
    ac->ops = ops;
    ac->ctx = ctx;
    atomic_init(&ac->refs, 1);
    pthread_mutex_init(&ac->mu, NULL);
    pthread_cond_init(&ac->cv, NULL);
}

void api_call_unref(struct api_call *ac) {
    if (atomic_fetch_sub(&ac->refs, 1) != 1)
        return;
    if (ac->job)
        job_release(ac->job);
    if (ac->pm)
        pool_release(ac->api->pool, ac->pm);
    chat_stream_free(ac->cs);
    pthread_mutex_destroy(&ac->mu);
    pthread_cond_destroy(&ac->cv);
    ac->ops->free(ac->ctx);
}

int api_call_job(struct api_call *ac, const int32_t *ids, size_t n, const struct job_params *p,
                 bool split, bool thinking) {
    const enum chat_family fam = ac->pm->family;
    /* Qwen3.5's generation prompt opens <think>: the reply starts inside it */
    if (split && !(ac->cs = chat_stream_new(fam, fam == CHAT_QWEN35 && thinking)))
        return -ENOMEM;
    const struct job_callbacks cb = {call_on_token, call_on_text, call_on_done};
    ac->job = job_new(ids, n, p, &cb, ac);
    return ac->job ? 0 : -ENOMEM;
}

void api_call_feed(struct api_call *ac, const char *text, size_t len) {
    if (ac->cs) {
        chat_stream_feed(ac->cs, text, len, ac->ops->event, ac->ctx);
    } else {
        struct chat_event ev = {.kind = CHAT_EVENT_CONTENT, .text = text, .len = len};
        ac->ops->event(ac->ctx, &ev);
    }
}

void api_call_finish(struct api_call *ac) {
    if (ac->cs)
        chat_stream_finish(ac->cs, ac->ops->event, ac->ctx);
}

int api_call_stream(struct api_call *ac) {
    ac->out = http_stream_new();
    return ac->out ? 0 : -ENOMEM;
}

void api_call_send(struct api_call *ac, const char *event, const char *data) {
    struct strbuf f = {0};
    if (event) {
        strbuf_puts(&f, "event: ");
        strbuf_puts(&f, event);
        strbuf_puts(&f, "\n");
    }
    strbuf_puts(&f, "data: ");
    strbuf_puts(&f, data);
    strbuf_puts(&f, "\n\n");
    if (!f.oom)
        http_stream_write(ac->out, f.p, f.n);
    free(f.p);
}

int api_call_run(struct api_call *ac, const struct http_request *hr, const char *content_type,
                 struct http_response *out) {
    if (ac->out) {
        atomic_fetch_add(&ac->refs, 2); /* the job's and the gone hook's */
        http_stream_on_gone(ac->out, call_on_gone, ac);
        if (scheduler_submit(ac->pm->sched, ac->job) < 0) {
            atomic_fetch_sub(&ac->refs, 2);
            http_stream_discard(ac->out);
            ac->out = NULL;
            return -EBUSY;
        }
        out->status = 200;
        out->content_type = content_type;
        out->stream = ac->out;
        return 0;
    }
    atomic_fetch_add(&ac->refs, 1); /* the job's */
    if (scheduler_submit(ac->pm->sched, ac->job) < 0) {
        atomic_fetch_sub(&ac->refs, 1);
        return -EBUSY;
    }
    /* wait for the job; a client that hangs up meanwhile cancels it (checked every 100 ms) */
    pthread_mutex_lock(&ac->mu);
    while (!ac->done) {
        struct timespec until = clock_deadline_ms(100);
        if (pthread_cond_timedwait(&ac->cv, &ac->mu, &until) != 0 && !ac->done &&
            http_peer_gone(hr))
            job_cancel(ac->job);
    }
    pthread_mutex_unlock(&ac->mu);
    return 0;
}
