/* search.h - web search for the search path: a query goes to DuckDuckGo's HTML endpoint (parsed
 * with libxml2's HTML parser) or to a SearXNG instance's JSON API (parsed with jansson); results
 * come back as title, URL and snippet. Both parsers are pure functions of the bytes so tests feed
 * them saved pages.
 *
 *     struct search_results res;
 *     search_run(&http, SEARCH_DUCKDUCKGO, "https://html.duckduckgo.com/html/", "query", 5, &res,
 *                err, sizeof(err));
 *     ... res.v[i].title / url / snippet ...
 *     search_results_release(&res);
 */
#ifndef SNIPER_AGENT_SEARCH_H
#define SNIPER_AGENT_SEARCH_H

#include "http_client.h"

#include <stddef.h>

enum search_backend { SEARCH_DUCKDUCKGO, SEARCH_SEARXNG };

struct search_result {
    char *title;     /* owned, whitespace collapsed */
    char *url;       /* owned, the target (DuckDuckGo's redirect unwrapped) */
    char *snippet;   /* owned, may be "" */
};

struct search_results {
    struct search_result *v;   /* n entries, owned */
    size_t n;
};

/* "duckduckgo" (or "ddg") and "searxng" into *out. Returns 0 or -EINVAL. */
int search_backend_parse(const char *name, enum search_backend *out);

/* Results of a DuckDuckGo HTML page (anchors of class result__a, snippets of class
 * result__snippet), at most max. Returns 0 (possibly with none), -ENOMEM or -EPROTO (not
 * parseable as HTML) with err filled. */
int search_parse_ddg_html(const char *html, size_t n, size_t max, struct search_results *out,
                          char *err, size_t err_len);

/* Results of a SearXNG JSON answer ({"results": [{"title", "url", "content"}]}), at most max.
 * Returns 0, -ENOMEM or -EPROTO (not that shape) with err filled. */
int search_parse_searxng_json(const char *json, size_t n, size_t max, struct search_results *out,
                              char *err, size_t err_len);

/* Sends query to the backend at base_url (DuckDuckGo: base_url?q=...; SearXNG:
 * base_url/search?q=...&format=json) and parses the answer. Returns 0 or a negative error
 * (http_request()'s, -EPROTO for an HTTP error status or an unparseable page) with err filled. */
int search_run(const struct http_client *hc, enum search_backend backend, const char *base_url,
               const char *query, size_t max, struct search_results *out, char *err,
               size_t err_len);

/* The model's rewrite reduced to a query: its first non-empty line without surrounding quotes,
 * backquotes or a "Query:" label. Returns a malloc'd string (caller frees), "" when nothing is
 * left, or NULL on no memory. */
char *search_query_clean(const char *reply);

/* The readable text of an HTML page: text outside script, style, noscript, head and template,
 * whitespace collapsed, cut to at most max_bytes on a UTF-8 boundary. Returns a malloc'd string
 * (caller frees; "" for a page with no text) or NULL on no memory or an unparseable page. */
char *search_page_text(const char *html, size_t n, size_t max_bytes);

void search_results_release(struct search_results *r);

#endif
