/* response_store.c - stored responses in a list kept in insertion order (oldest first), so that
 * expiry and eviction drop from the front. A few thousand entries at most: a linear search by id
 * costs far less than the generation that made each one.
 * Invariants: bytes is the sum of the entries' body and items lengths; every entry's added time
 * is no later than the next one's. */
#include "response_store.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"

struct entry {
    struct entry *next;
    char *id, *body, *items;
    size_t bytes;          /* strlen(body) + strlen(items) */
    double added_s;        /* clock_now_s() when put */
};

struct response_store {
    pthread_mutex_t mu;    /* guards the fields below */
    struct entry *head, *tail; /* oldest first */
    size_t count, bytes;
    size_t max_count, max_bytes;
    double ttl_s;
};

struct response_store *response_store_new(size_t max_count, size_t max_bytes, double ttl_s) {
    struct response_store *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    pthread_mutex_init(&s->mu, NULL);
    s->max_count = max_count;
    s->max_bytes = max_bytes;
    s->ttl_s = ttl_s;
    return s;
}

static void entry_free(struct entry *e) {
    if (!e)
        return;
    free(e->id);
    free(e->body);
    free(e->items);
    free(e);
}

void response_store_free(struct response_store *s) {
    if (!s)
        return;
    for (struct entry *e = s->head, *next; e; e = next) {
        next = e->next;
        entry_free(e);
    }
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* Unlinks e (prev is the entry before it, or NULL for the head) and frees it. */
static void unlink_entry(struct response_store *s, struct entry *prev, struct entry *e) {
    if (prev)
        prev->next = e->next;
    else
        s->head = e->next;
    if (s->tail == e)
        s->tail = prev;
    s->count--;
    s->bytes -= e->bytes;
    entry_free(e);
}

/* Drops the entries older than the ttl (they are at the front). */
static void expire(struct response_store *s, double now) {
    while (s->head && now - s->head->added_s > s->ttl_s)
        unlink_entry(s, NULL, s->head);
}

/* The entry of id and the one before it, or NULL. */
static struct entry *find(struct response_store *s, const char *id, struct entry **prev) {
    *prev = NULL;
    for (struct entry *e = s->head; e; *prev = e, e = e->next)
        if (strcmp(e->id, id) == 0)
            return e;
    return NULL;
}

int response_store_put(struct response_store *s, const char *id, const char *body,
                       const char *items) {
    size_t bytes = strlen(body) + strlen(items);
    if (bytes > s->max_bytes)
        return -E2BIG;
    struct entry *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    e->id = strdup(id);
    e->body = strdup(body);
    e->items = strdup(items);
    if (!e->id || !e->body || !e->items) {
        entry_free(e);
        return -ENOMEM;
    }
    e->bytes = bytes;
    e->added_s = clock_now_s();
    pthread_mutex_lock(&s->mu);
    struct entry *prev, *old = find(s, id, &prev);
    if (old)
        unlink_entry(s, prev, old);
    expire(s, e->added_s);
    while (s->head && (s->count + 1 > s->max_count || s->bytes + bytes > s->max_bytes))
        unlink_entry(s, NULL, s->head);
    if (s->tail)
        s->tail->next = e;
    else
        s->head = e;
    s->tail = e;
    s->count++;
    s->bytes += bytes;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

int response_store_get(struct response_store *s, const char *id, char **body, char **items) {
    int rc = -ENOENT;
    char *b = NULL, *it = NULL;
    pthread_mutex_lock(&s->mu);
    expire(s, clock_now_s());
    struct entry *prev, *e = find(s, id, &prev);
    if (e) {
        b = body ? strdup(e->body) : NULL;
        it = items ? strdup(e->items) : NULL;
        rc = (body && !b) || (items && !it) ? -ENOMEM : 0;
    }
    pthread_mutex_unlock(&s->mu);
    if (rc < 0) {
        free(b);
        free(it);
        b = it = NULL;
    }
    if (body)
        *body = b;
    if (items)
        *items = it;
    return rc;
}

int response_store_delete(struct response_store *s, const char *id) {
    pthread_mutex_lock(&s->mu);
    struct entry *prev, *e = find(s, id, &prev);
    if (e)
        unlink_entry(s, prev, e);
    pthread_mutex_unlock(&s->mu);
    return e ? 0 : -ENOENT;
}

size_t response_store_count(struct response_store *s) {
    pthread_mutex_lock(&s->mu);
    size_t n = s->count;
    pthread_mutex_unlock(&s->mu);
    return n;
}
