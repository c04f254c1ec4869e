/* stop_text.h - generated text held back while its tail may be the start of a stop string, shown
 * once it cannot be; a completed stop string ends the text before it.
 *
 *     struct stop_text t;
 *     stop_text_init(&t, stops, n_stop);                  // stops borrowed while t is used
 *     if (stop_text_push(&t, piece, len, show, ctx)) ...  // for each decoded piece: true = stop
 *     stop_text_flush(&t, show, ctx);                     // at the end: what was held is text
 *
 * Bytes only: a stop string matches wherever its bytes arrive, split across pieces or inside a
 * UTF-8 sequence; the pieces' own UTF-8 completeness is the tokenizer stream's business. */
#ifndef SNIPER_STOP_TEXT_H
#define SNIPER_STOP_TEXT_H

#include <stdbool.h>
#include <stddef.h>

#define STOP_TEXT_BUF 4096 /* bytes held at most; stop strings must be shorter */

/* Called with text that is certain (len > 0). */
typedef void (*stop_text_fn)(void *ctx, const char *text, size_t len);

struct stop_text {
    const char *const *stops; /* [n_stop] non-empty NUL-terminated stop strings, borrowed */
    int n_stop;
    char buf[STOP_TEXT_BUF];  /* the held-back text, buf[0..len) */
    size_t len;
};

/* Starts t empty over stops[0..n_stop) (borrowed until t is no longer pushed to). */
void stop_text_init(struct stop_text *t, const char *const *stops, int n_stop);

/* Appends text[0..len) and calls show with what can no longer be part of a stop string. Returns
 * true when a stop string completed: the text before its first occurrence was shown, the rest is
 * dropped and t is empty. */
bool stop_text_push(struct stop_text *t, const char *text, size_t len, stop_text_fn show,
                    void *ctx);

/* Shows what is held back (no stop string can complete any more) and empties t. */
void stop_text_flush(struct stop_text *t, stop_text_fn show, void *ctx);

#endif
