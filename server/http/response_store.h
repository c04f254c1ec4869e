/* response_store.h - the Responses API's stored responses (store: true), kept in memory so that a
 * later request can continue one (previous_response_id) or fetch or delete it by id. Bounded: at
 * most max_count responses, max_bytes of text in all, each kept ttl_s seconds; the oldest go
 * first when a bound is reached. Thread-safe (one mutex); values are copied in and out.
 *
 *     struct response_store *s = response_store_new(1000, 64 << 20, 3600);
 *     response_store_put(s, "resp_1", body_json, items_json);
 *     char *body, *items;
 *     if (response_store_get(s, "resp_1", &body, &items) == 0) { ... free(body); free(items); } */
#ifndef SNIPER_RESPONSE_STORE_H
#define SNIPER_RESPONSE_STORE_H

#include <stddef.h>

struct response_store;

/* An empty store with these bounds (each > 0). Returns NULL on no memory. */
struct response_store *response_store_new(size_t max_count, size_t max_bytes, double ttl_s);

/* Frees the store and what it holds; accepts NULL. */
void response_store_free(struct response_store *s);

/* Keeps copies of body (the response object, JSON) and items (the conversation up to and with
 * the response's output, a JSON array) under id, replacing an entry of the same id and dropping
 * expired and then the oldest entries until the bounds hold. Returns 0, -E2BIG when the entry
 * alone exceeds max_bytes, or -ENOMEM. */
int response_store_put(struct response_store *s, const char *id, const char *body,
                       const char *items);

/* Copies of id's body and items (malloc'd, the caller frees them; either pointer may be NULL
 * when not wanted). Returns 0, -ENOENT when id is unknown or expired, or -ENOMEM. */
int response_store_get(struct response_store *s, const char *id, char **body, char **items);

/* Forgets id. Returns 0 or -ENOENT. */
int response_store_delete(struct response_store *s, const char *id);

/* Entries held now (expired ones not yet dropped count too). */
size_t response_store_count(struct response_store *s);

#endif
