/* search.c - see search.h. Untrusted pages: libxml2 parses with NONET and RECOVER, every string
 * kept is copied and whitespace-collapsed, the number of results is capped. */
#include "search.h"
#include "err.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <libxml/HTMLparser.h>
#include <libxml/uri.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int search_backend_parse(const char *name, enum search_backend *out) {
    if (name && (strcmp(name, "duckduckgo") == 0 || strcmp(name, "ddg") == 0)) {
        *out = SEARCH_DUCKDUCKGO;
        return 0;
    }
    if (name && strcmp(name, "searxng") == 0) {
        *out = SEARCH_SEARXNG;
        return 0;
    }
    return -EINVAL;
}

void search_results_release(struct search_results *r) {
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++) {
        free(r->v[i].title);
        free(r->v[i].url);
        free(r->v[i].snippet);
    }
    free(r->v);
    r->v = NULL;
    r->n = 0;
}

/* s with runs of whitespace made one space and the ends trimmed; malloc'd, or NULL. */
static char *collapse(const char *s) {
    char *out = malloc(strlen(s ? s : "") + 1), *o = out;
    if (!out)
        return NULL;
    bool space = false;
    for (const char *p = s ? s : ""; *p; p++) {
        if (isspace((unsigned char)*p)) {
            space = o != out;
            continue;
        }
        if (space)
            *o++ = ' ';
        space = false;
        *o++ = *p;
    }
    *o = '\0';
    return out;
}

/* Appends a result (strings copied). Returns 0 or -ENOMEM. */
static int results_add(struct search_results *r, const char *title, const char *url,
                       const char *snippet) {
    struct search_result *v = realloc(r->v, (r->n + 1) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    r->v = v;
    struct search_result *x = &v[r->n];
    x->title = collapse(title);
    x->url = collapse(url);
    x->snippet = collapse(snippet);
    r->n++;
    return x->title && x->url && x->snippet ? 0 : -ENOMEM;
}

/* ---- DuckDuckGo's HTML page ---- */

static bool has_class(xmlNode *n, const char *cls) {
    xmlChar *c = xmlGetProp(n, (const xmlChar *)"class");
    bool found = false;
    size_t len = strlen(cls);
    for (const char *p = (const char *)c; p && *p && !found;) {
        while (*p == ' ')
            p++;
        const char *e = p;
        while (*e && *e != ' ')
            e++;
        found = (size_t)(e - p) == len && memcmp(p, cls, len) == 0;
        p = e;
    }
    xmlFree(c);
    return found;
}

/* DuckDuckGo links through //duckduckgo.com/l/?uddg=<target>&rut=...: the target, decoded, as a
 * malloc'd string; other links as they are ("//" given https:). NULL on no memory. */
static char *ddg_target(const char *href) {
    const char *u = strstr(href, "uddg=");
    if (u) {
        u += 5;
        size_t n = strcspn(u, "&");
        char *dec = xmlURIUnescapeString(u, (int)n, NULL);
        char *copy = dec ? strdup(dec) : NULL;
        xmlFree(dec);
        return copy;
    }
    char *out;
    if (asprintf(&out, "%s%s", strncmp(href, "//", 2) == 0 ? "https:" : "", href) < 0)
        return NULL;
    return out;
}

struct ddg_walk {
    struct search_results *out;
    size_t max;
    bool snippet_taken;   /* the last result already has its snippet */
    int rc;
};

static void ddg_visit(struct ddg_walk *w, xmlNode *n) {
    for (; n && w->rc == 0; n = n->next) {
        if (n->type != XML_ELEMENT_NODE)
            continue;
        if (has_class(n, "result__a") && w->out->n < w->max) {
            xmlChar *href = xmlGetProp(n, (const xmlChar *)"href");
            xmlChar *title = xmlNodeGetContent(n);
            char *url = href ? ddg_target((const char *)href) : NULL;
            if (url && *url && title)
                w->rc = results_add(w->out, (const char *)title, url, "");
            w->snippet_taken = false;
            free(url);
            xmlFree(href);
            xmlFree(title);
            continue;
        }
        if (has_class(n, "result__snippet") && w->out->n > 0 && !w->snippet_taken) {
            xmlChar *text = xmlNodeGetContent(n);
            char *s = collapse((const char *)text);
            struct search_result *last = &w->out->v[w->out->n - 1];
            if (s) {
                free(last->snippet);
                last->snippet = s;
            }
            w->snippet_taken = true;
            xmlFree(text);
            continue;
        }
        ddg_visit(w, n->children);
    }
}

int search_parse_ddg_html(const char *html, size_t n, size_t max, struct search_results *out,
                          char *err, size_t err_len) {
    memset(out, 0, sizeof(*out));
    if (n > (size_t)1 << 30) {
        err_set(err, err_len, "search page too large");
        return -EPROTO;
    }
    htmlDocPtr doc = htmlReadMemory(html, (int)n, NULL, "UTF-8",
                                    HTML_PARSE_RECOVER | HTML_PARSE_NOERROR |
                                        HTML_PARSE_NOWARNING | HTML_PARSE_NONET);
    if (!doc) {
        err_set(err, err_len, "search page is not parseable HTML");
        return -EPROTO;
    }
    struct ddg_walk w = { .out = out, .max = max };
    ddg_visit(&w, xmlDocGetRootElement(doc));
    xmlFreeDoc(doc);
    if (w.rc < 0) {
        err_set(err, err_len, "out of memory");
        search_results_release(out);
    }
    return w.rc;
}

/* ---- SearXNG's JSON ---- */

int search_parse_searxng_json(const char *json, size_t n, size_t max, struct search_results *out,
                              char *err, size_t err_len) {
    memset(out, 0, sizeof(*out));
    json_error_t jerr;
    json_t *root = json_loadb(json, n, 0, &jerr);
    json_t *results = json_object_get(root, "results");
    int rc = 0;
    if (!json_is_array(results)) {
        err_set(err, err_len, "malformed SearXNG answer: %s",
                root ? "no \"results\" array" : jerr.text);
        json_decref(root);
        return -EPROTO;
    }
    size_t i;
    json_t *r;
    json_array_foreach(results, i, r) {
        const char *url = json_string_value(json_object_get(r, "url"));
        const char *title = json_string_value(json_object_get(r, "title"));
        const char *content = json_string_value(json_object_get(r, "content"));
        if (out->n >= max || rc < 0)
            break;
        if (url && *url)
            rc = results_add(out, title ? title : url, url, content ? content : "");
    }
    json_decref(root);
    if (rc < 0) {
        err_set(err, err_len, "out of memory");
        search_results_release(out);
    }
    return rc;
}

/* ---- a page reduced to text ---- */

static bool skipped_element(const xmlNode *n) {
    static const char *const skip[] = { "script", "style", "noscript", "head", "template" };
    for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
        if (strcmp((const char *)n->name, skip[i]) == 0)
            return true;
    return false;
}

static void text_visit(const xmlNode *n, FILE *f) {
    for (; n; n = n->next) {
        if (n->type == XML_TEXT_NODE && n->content)
            fprintf(f, "%s ", (const char *)n->content);
        else if (n->type == XML_ELEMENT_NODE && !skipped_element(n))
            text_visit(n->children, f);
    }
}

char *search_page_text(const char *html, size_t n, size_t max_bytes) {
    if (n > (size_t)1 << 30)
        return NULL;
    htmlDocPtr doc = htmlReadMemory(html, (int)n, NULL, "UTF-8",
                                    HTML_PARSE_RECOVER | HTML_PARSE_NOERROR |
                                        HTML_PARSE_NOWARNING | HTML_PARSE_NONET);
    char *raw = NULL, *text = NULL;
    size_t raw_bytes = 0;
    FILE *f = open_memstream(&raw, &raw_bytes);
    if (!f) {
        xmlFreeDoc(doc);
        return NULL;
    }
    if (doc)
        text_visit(xmlDocGetRootElement(doc), f);
    fclose(f);
    xmlFreeDoc(doc);
    if (raw && (text = collapse(raw))) {
        size_t len = strlen(text);
        if (len > max_bytes) {
            len = max_bytes;
            while (len > 0 && ((unsigned char)text[len] & 0xC0) == 0x80)
                len--;    /* do not cut a UTF-8 sequence */
            text[len] = '\0';
        }
    }
    free(raw);
    return text;
}

/* ---- the request ---- */

int search_run(const struct http_client *hc, enum search_backend backend, const char *base_url,
               const char *query, size_t max, struct search_results *out, char *err,
               size_t err_len) {
    struct http_response r = { 0 };
    char *q = http_escape(query), *url = NULL;
    int rc = -ENOMEM;
    memset(out, 0, sizeof(*out));
    bool ddg = backend == SEARCH_DUCKDUCKGO;
    size_t bn = strlen(base_url);
    const char *slash = bn && base_url[bn - 1] == '/' ? "" : "/";
    if (!q || (ddg ? asprintf(&url, "%s%sq=%s", base_url, strchr(base_url, '?') ? "&" : "?", q)
                   : asprintf(&url, "%s%ssearch?q=%s&format=json", base_url, slash, q)) < 0) {
        url = NULL;
        err_set(err, err_len, "out of memory");
        goto out;
    }
    if ((rc = http_request(hc, "GET", url, NULL, NULL, NULL, &r, err, err_len)) < 0)
        goto out;
    if (r.status < 200 || r.status >= 300) {
        err_set(err, err_len, "search backend answered %ld for %s", r.status, url);
        rc = -EPROTO;
        goto out;
    }
    rc = ddg ? search_parse_ddg_html(r.body, r.body_bytes, max, out, err, err_len)
             : search_parse_searxng_json(r.body, r.body_bytes, max, out, err, err_len);
out:
    http_response_release(&r);
    free(url);
    free(q);
    return rc;
}

char *search_query_clean(const char *reply) {
    const char *p = reply ? reply : "";
    while (*p && isspace((unsigned char)*p))
        p++;
    size_t n = strcspn(p, "\r\n");
    if (n >= 6 && strncasecmp(p, "query:", 6) == 0) {
        p += 6, n -= 6;
        while (n && isspace((unsigned char)*p))
            p++, n--;
    }
    while (n && isspace((unsigned char)p[n - 1]))
        n--;
    while (n >= 2 && strchr("\"'`", *p) && p[n - 1] == *p)
        p++, n -= 2;
    return strndup(p, n);
}
