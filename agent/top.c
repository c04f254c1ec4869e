/* top.c - see top.h. A frame is plain lines "label     value"; the live view draws it from the
 * top-left corner (ESC [H), ends every line with the caller's eol (clear to end of line) and
 * clears below the last line (ESC [J), so nothing of a previous frame survives and nothing
 * flickers. The terminal is put in non-canonical, no-echo mode only while the view runs. */
#include "clock.h"
#include "top.h"
#include "err.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define ESC_HOME "\x1b[H"
#define ESC_CLEAR_LINE "\x1b[K"
#define ESC_CLEAR_BELOW "\x1b[J"

/* ---- reading the stats object ------------------------------------------------------------- */

/* s[key], or s[obj][key] when obj is not NULL; NULL when absent. */
static const json_t *field(const json_t *s, const char *obj, const char *key) {
    if (obj)
        s = json_object_get(s, obj);
    return json_object_get(s, key);
}

/* A number field as a double; NAN when absent or not a number. */
static double num(const json_t *s, const char *obj, const char *key) {
    const json_t *v = field(s, obj, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static const char *str(const json_t *s, const char *obj, const char *key) {
    const char *v = json_string_value(field(s, obj, key));
    return v ? v : "";
}

/* ---- formatting numbers (into the caller's buffer, which is returned) ---------------------- */

static const char *fmt_num(char *b, size_t n, double x, int decimals) {
    if (isnan(x))
        snprintf(b, n, "-");
    else
        snprintf(b, n, "%.*f", decimals, x);
    return b;
}

static const char *fmt_bytes(char *b, size_t n, double x) {
    static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    int i = 0;
    if (isnan(x))
        return fmt_num(b, n, x, 0);
    while (x >= 1024 && i < 4) {
        x /= 1024;
        i++;
    }
    snprintf(b, n, i ? "%.1f %s" : "%.0f %s", x, unit[i]);
    return b;
}

static const char *fmt_duration(char *b, size_t n, double s) {
    if (isnan(s) || s < 0)
        return fmt_num(b, n, NAN, 0);
    long t = (long)s;
    if (t >= 86400)
        snprintf(b, n, "%ldd %02ldh %02ldm", t / 86400, t / 3600 % 24, t / 60 % 60);
    else
        snprintf(b, n, "%ldh %02ldm %02lds", t / 3600, t / 60 % 60, t % 60);
    return b;
}

/* "[#####.....]" for a fraction in [0, 1]. */
static const char *fmt_bar(char *b, size_t n, double frac) {
    enum { W = 20 };
    char bar[W + 3];
    int full = isnan(frac) || frac <= 0 ? 0 : frac >= 1 ? W : (int)(frac * W + 0.5);
    bar[0] = '[';
    for (int i = 0; i < W; i++)
        bar[1 + i] = i < full ? '#' : '.';
    bar[W + 1] = ']';
    bar[W + 2] = '\0';
    snprintf(b, n, "%s", bar);
    return b;
}

/* ---- one frame ----------------------------------------------------------------------------- */

/* One "label     text" line. */
__attribute__((format(printf, 4, 5))) static void line(FILE *f, const char *eol, const char *label,
                                                       const char *fmt, ...) {
    va_list ap;
    fprintf(f, "%-10s ", label);
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputs(eol, f);
}

/* " (now X)" for a live rate, "" otherwise; into b. */
static const char *fmt_now(char *b, size_t n, const struct top_rates *r, double rate, int dec) {
    char x[32];
    if (r && r->valid)
        snprintf(b, n, ", %s now", fmt_num(x, sizeof(x), rate, dec));
    else
        b[0] = '\0';
    return b;
}

static void print_memory(FILE *f, const json_t *s, const char *eol) {
    char a[32], b[32], c[32], bar[32];
    double rss = num(s, NULL, "rss_bytes"), budget = num(s, NULL, "ram_budget_bytes");
    if (budget > 0)
        line(f, eol, "memory", "RSS %s of %s budget (%s %%) %s", fmt_bytes(a, sizeof(a), rss),
             fmt_bytes(b, sizeof(b), budget), fmt_num(c, sizeof(c), 100 * rss / budget, 0),
             fmt_bar(bar, sizeof(bar), rss / budget));
    else
        line(f, eol, "memory", "RSS %s, no budget", fmt_bytes(a, sizeof(a), rss));
}

static void print_experts(FILE *f, const json_t *s, const struct top_rates *r, const char *eol) {
    char a[32], b[32], c[32], d[48], e[32];
    if (!json_is_true(field(s, "experts", "streaming"))) {
        line(f, eol, "experts", "all in RAM (no --ram-budget): nothing read per token");
        return;
    }
    line(f, eol, "experts", "hit rate %s %% (%s hits, %s misses), %s slots of %s",
         fmt_num(a, sizeof(a), 100 * num(s, "experts", "hit_rate"), 1),
         fmt_num(b, sizeof(b), num(s, "experts", "hits"), 0),
         fmt_num(c, sizeof(c), num(s, "experts", "misses"), 0),
         fmt_num(e, sizeof(e), num(s, "experts", "slots"), 0),
         fmt_bytes(d, sizeof(d), num(s, "experts", "slot_bytes")));
    line(f, eol, "reads", "%s per token, %s MB/s avg%s, %s in all",
         fmt_bytes(a, sizeof(a), num(s, "experts", "bytes_per_token")),
         fmt_num(b, sizeof(b), num(s, "experts", "read_MBps"), 1),
         fmt_now(d, sizeof(d), r, r ? r->read_MBps : NAN, 1),
         fmt_bytes(c, sizeof(c), num(s, "experts", "bytes_read")));
    line(f, eol, "I/O wait", "%s s, prefetch %s used of %s issued",
         fmt_num(a, sizeof(a), num(s, "experts", "io_wait_s"), 3),
         fmt_num(b, sizeof(b), num(s, "experts", "prefetch_used"), 0),
         fmt_num(c, sizeof(c), num(s, "experts", "prefetch_issued"), 0));
}

/* The GPU's line, where the model runs on one, and on three levels the VRAM slots' line. */
static void print_gpu(FILE *f, const json_t *s, const char *eol) {
    char a[32], b[32], c[32], d[32], e[32];
    if (!json_is_true(field(s, "gpu", "on")))
        return;
    line(f, eol, "gpu", "weights %s, KV %s, activations %s in VRAM",
         fmt_bytes(a, sizeof(a), num(s, "gpu", "weights_bytes")),
         fmt_bytes(b, sizeof(b), num(s, "gpu", "kv_bytes")),
         fmt_bytes(c, sizeof(c), num(s, "gpu", "activation_bytes")));
    if (json_is_true(field(s, "gpu", "experts_in_place"))) {
        line(f, eol, "experts", "every routed expert computed by the GPU in the expert cache's "
             "slots, %s pairs", fmt_num(a, sizeof(a), num(s, "gpu", "pairs_on_gpu"), 0));
        return;
    }
    const double slots = num(s, "gpu", "experts_in_vram"), n = num(s, "gpu", "experts_per_layer");
    if (!(slots < n)) /* every expert in VRAM (or no experts): nothing moves */
        return;
    line(f, eol, "vram", "%s of %s experts a layer, hit rate %s %%, %s promotions",
         fmt_num(a, sizeof(a), slots, 0), fmt_num(b, sizeof(b), n, 0),
         fmt_num(c, sizeof(c), 100 * num(s, "gpu", "vram_hit_rate"), 1),
         fmt_num(d, sizeof(d), num(s, "gpu", "vram_promotions"), 0));
    line(f, eol, "pairs", "%s on the GPU, %s on the CPU",
         fmt_num(a, sizeof(a), num(s, "gpu", "pairs_on_gpu"), 0),
         fmt_num(e, sizeof(e), num(s, "gpu", "pairs_on_cpu"), 0));
}

/* One line for the slots ("0 decode 12.3 tok/s, 1 prefill, 2 idle") and one for the last step. */
static void print_slots(FILE *f, const json_t *s, const char *eol) {
    const json_t *slots = field(s, NULL, "slots");
    if (!json_is_array(slots)) {
        line(f, eol, "slots", "-");
        return;
    }
    char text[512] = "", a[32], b[32], c[32], d[48];
    size_t used = 0, n_active = 0;
    for (size_t i = 0; i < json_array_size(slots) && used < sizeof(text); i++) {
        const json_t *l = json_array_get(slots, i);
        const char *state = str(l, NULL, "state");
        n_active += strcmp(state, "idle") != 0 && state[0];
        int k = strcmp(state, "decode") == 0
                    ? snprintf(text + used, sizeof(text) - used, "%s%zu decode %s tok/s",
                               i ? ", " : "", i, fmt_num(a, sizeof(a),
                                                         num(l, NULL, "decode_tokens_per_s"), 1))
                    : snprintf(text + used, sizeof(text) - used, "%s%zu %s", i ? ", " : "", i,
                               state[0] ? state : "-");
        used += k > 0 ? (size_t)k : 0;
    }
    line(f, eol, "slots", "%zu of %zu active: %s", n_active, json_array_size(slots), text);
    line(f, eol, "step", "%s tokens of %s sequences, %s experts a layer; %s read a step",
         fmt_num(a, sizeof(a), num(s, "step", "avg_batch_tokens"), 1),
         fmt_num(b, sizeof(b), num(s, "step", "avg_batch_sequences"), 1),
         fmt_num(c, sizeof(c), num(s, "step", "avg_union_experts"), 1),
         fmt_bytes(d, sizeof(d), num(s, "step", "bytes_read_per_step")));
}

/* The models the daemon serves, when it lists them: "2 of 3 loaded: a (loaded), b (unloaded) ..."
 * (a load in progress with its percentage). */
static void print_models(FILE *f, const json_t *s, const char *eol) {
    const json_t *models = field(s, NULL, "models");
    if (!json_is_array(models) || json_array_size(models) == 0)
        return;
    char text[768] = "";
    size_t used = 0, loaded = 0;
    for (size_t i = 0; i < json_array_size(models) && used < sizeof(text); i++) {
        const json_t *m = json_array_get(models, i);
        const char *state = str(m, NULL, "state");
        loaded += strcmp(state, "loaded") == 0;
        int k = strcmp(state, "loading") == 0
                    ? snprintf(text + used, sizeof(text) - used, "%s%s (loading %.0f%%)",
                               i ? ", " : "", str(m, NULL, "id"), 100 * num(m, NULL, "progress"))
                    : snprintf(text + used, sizeof(text) - used, "%s%s (%s)", i ? ", " : "",
                               str(m, NULL, "id"), state[0] ? state : "-");
        used += k > 0 ? (size_t)k : 0;
    }
    line(f, eol, "models", "%zu of %zu loaded: %s", loaded, json_array_size(models), text);
}

static void print_transfer(FILE *f, const json_t *s, const char *eol) {
    char a[32], b[32], c[32], bar[32];
    const char *kind = str(s, "transfer", "kind");
    if (!kind[0]) {
        line(f, eol, "transfer", "none");
        return;
    }
    double done = num(s, "transfer", "done_bytes"), total = num(s, "transfer", "total_bytes");
    if (total > 0)
        line(f, eol, "transfer", "%s %s: %s of %s (%s %%) %s", kind, str(s, "transfer", "name"),
             fmt_bytes(a, sizeof(a), done), fmt_bytes(b, sizeof(b), total),
             fmt_num(c, sizeof(c), 100 * done / total, 0),
             fmt_bar(bar, sizeof(bar), done / total));
    else
        line(f, eol, "transfer", "%s %s: %s", kind, str(s, "transfer", "name"),
             fmt_bytes(a, sizeof(a), done));
}

void top_print(FILE *f, const json_t *s, const struct top_rates *r, const char *server,
               const char *eol) {
    char a[32], b[32], c[32], d[48];
    const char *model = str(s, NULL, "model");
    fprintf(f, "sniper top  %s%s", server, eol);
    fputs(eol, f);
    line(f, eol, "model", "%s, context %s tokens", model[0] ? model : "-",
         fmt_num(a, sizeof(a), num(s, NULL, "n_ctx"), 0));
    print_models(f, s, eol);
    line(f, eol, "uptime", "%s", fmt_duration(a, sizeof(a), num(s, NULL, "uptime_s")));
    line(f, eol, "requests", "%s (%s errors), %s completions, %s cancelled",
         fmt_num(a, sizeof(a), num(s, NULL, "requests"), 0),
         fmt_num(b, sizeof(b), num(s, NULL, "errors"), 0),
         fmt_num(c, sizeof(c), num(s, NULL, "completions"), 0),
         fmt_num(d, sizeof(d), num(s, NULL, "cancelled"), 0));
    const json_t *busy = field(s, NULL, "busy");
    line(f, eol, "queue", "%s waiting, %s", fmt_num(a, sizeof(a), num(s, NULL, "queue"), 0),
         json_is_boolean(busy) ? (json_is_true(busy) ? "busy" : "idle") : "-");
    line(f, eol, "tokens", "prompt %s (%s cached), completion %s",
         fmt_num(a, sizeof(a), num(s, "tokens", "prompt"), 0),
         fmt_num(b, sizeof(b), num(s, "tokens", "cached"), 0),
         fmt_num(c, sizeof(c), num(s, "tokens", "completion"), 0));
    line(f, eol, "prefill", "%s tok/s avg%s",
         fmt_num(a, sizeof(a), num(s, NULL, "prefill_tokens_per_s"), 1),
         fmt_now(d, sizeof(d), r, r ? r->prefill_tps : NAN, 1));
    line(f, eol, "decode", "%s tok/s avg%s",
         fmt_num(a, sizeof(a), num(s, NULL, "decode_tokens_per_s"), 1),
         fmt_now(d, sizeof(d), r, r ? r->decode_tps : NAN, 1));
    print_slots(f, s, eol);
    print_memory(f, s, eol);
    print_experts(f, s, r, eol);
    print_gpu(f, s, eol);
    print_transfer(f, s, eol);
}

struct top_rates top_rates_between(const json_t *prev, const json_t *now, double dt_s) {
    struct top_rates r = { 0 };
    double p0 = num(prev, "tokens", "prompt") - num(prev, "tokens", "cached");
    double p1 = num(now, "tokens", "prompt") - num(now, "tokens", "cached");
    double c0 = num(prev, "tokens", "completion"), c1 = num(now, "tokens", "completion");
    double b0 = num(prev, "experts", "bytes_read"), b1 = num(now, "experts", "bytes_read");
    /* a counter that went back means the daemon restarted: no rate this time */
    if (!(dt_s > 0) || isnan(p0 + p1 + c0 + c1) || p1 < p0 || c1 < c0 || b1 < b0)
        return r;
    r.valid = true;
    r.prefill_tps = (p1 - p0) / dt_s;
    r.decode_tps = (c1 - c0) / dt_s;
    r.read_MBps = isnan(b0 + b1) ? NAN : (b1 - b0) / dt_s / 1e6;
    return r;
}

/* ---- the terminal ------------------------------------------------------------------------- */

struct term {
    int fd;                /* the keys' fd; -1 when keys are not read */
    bool raw;              /* saved holds the mode to restore */
    bool screen;           /* the output is a terminal: alternate screen, cursor hidden */
    struct termios saved;
    FILE *out;
};

/* Prepares fd (keys without Enter, no echo) and out (alternate screen, no cursor) when they are
 * terminals. Returns 0 or -errno. */
static int term_enter(struct term *t, int fd, FILE *out) {
    memset(t, 0, sizeof(*t));
    t->fd = fd;
    t->out = out;
    if (fd >= 0 && isatty(fd)) {
        if (tcgetattr(fd, &t->saved) < 0)
            return -errno;
        struct termios m = t->saved;
        m.c_lflag &= ~(tcflag_t)(ICANON | ECHO); /* ISIG stays: Ctrl-C raises SIGINT */
        m.c_cc[VMIN] = 1;
        m.c_cc[VTIME] = 0;
        if (tcsetattr(fd, TCSANOW, &m) < 0)
            return -errno;
        t->raw = true;
    }
    t->screen = isatty(fileno(out));
    if (t->screen)
        fputs("\x1b[?1049h\x1b[?25l", out);
    return 0;
}

static void term_leave(struct term *t) {
    if (t->raw)
        tcsetattr(t->fd, TCSANOW, &t->saved);
    if (t->screen)
        fputs("\x1b[?25h\x1b[?1049l", t->out);
    fflush(t->out);
}

/* Waits up to s seconds for a key. Returns true when it was q or Q; false on timeout or when the
 * cancel flag rose. End of input stops the reading of keys (t->fd = -1), not the view. */
static bool wait_quit(struct term *t, double s, volatile sig_atomic_t *cancel) {
    double end = clock_now_s() + s;
    for (;;) {
        double left = end - clock_now_s();
        if (left <= 0 || (cancel && *cancel))
            return false;
        struct pollfd p = { .fd = t->fd, .events = POLLIN };
        int n = poll(&p, t->fd >= 0 ? 1 : 0, (int)(left * 1000) + 1);
        if (n <= 0)
            continue; /* timeout (left <= 0 next) or EINTR (the flag is checked) */
        char c;
        ssize_t k = read(t->fd, &c, 1);
        if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN))
            t->fd = -1;
        else if (k == 1 && (c == 'q' || c == 'Q'))
            return true;
    }
}

/* ---- the loop ------------------------------------------------------------------------------ */

static int top_once(const struct top_opts *o, char *err, size_t err_len) {
    json_t *s = NULL;
    int rc = llm_json(o->llm, "GET", "/v1/stats", NULL, &s, err, err_len);
    if (rc < 0)
        return rc;
    top_print(o->out, s, NULL, o->server, "\n");
    fflush(o->out);
    json_decref(s);
    return 0;
}

int top_run(const struct top_opts *o, char *err, size_t err_len) {
    if (o->once)
        return top_once(o, err, err_len);
    struct term t;
    int rc = term_enter(&t, o->in_fd, o->out);
    if (rc < 0) {
        err_set(err, err_len, "cannot set up the terminal: %s", strerror(-rc));
        return rc;
    }
    json_t *prev = NULL;
    double t_prev = 0;
    while (!(o->cancel && *o->cancel)) {
        json_t *s = NULL;
        char ferr[512] = "";
        rc = llm_json(o->llm, "GET", "/v1/stats", NULL, &s, ferr, sizeof(ferr));
        if (rc == -ECANCELED)
            break;
        double t_now = clock_now_s();
        fputs(ESC_HOME, o->out);
        if (rc == 0) {
            struct top_rates r = prev ? top_rates_between(prev, s, t_now - t_prev)
                                      : (struct top_rates){ 0 };
            top_print(o->out, s, &r, o->server, ESC_CLEAR_LINE "\n");
            json_decref(prev);
            prev = s;
            t_prev = t_now;
        } else {
            fprintf(o->out, "sniper top  %s" ESC_CLEAR_LINE "\n" ESC_CLEAR_LINE "\n%s"
                    ESC_CLEAR_LINE "\n(trying again)" ESC_CLEAR_LINE "\n", o->server, ferr);
        }
        fputs(ESC_CLEAR_LINE "\n" "q quits" ESC_CLEAR_LINE ESC_CLEAR_BELOW, o->out);
        fflush(o->out);
        if (wait_quit(&t, o->interval_s, o->cancel))
            break;
    }
    json_decref(prev);
    term_leave(&t);
    return 0;
}
