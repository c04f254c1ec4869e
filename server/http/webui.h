/* webui.h - the web UI page (web/index.html), compiled into the binary: the Makefile runs
 * tools/embed.c to generate build/gen/webui.c, which defines these. api.c serves them at GET /. */
#ifndef SNIPER_WEBUI_H
#define SNIPER_WEBUI_H

#include <stddef.h>

extern const unsigned char webui_index_html[]; /* the page's bytes, then a NUL */
extern const size_t webui_index_html_len;      /* bytes, without the NUL */
extern const char webui_index_html_csp[];      /* Content-Security-Policy allowing the page's own
                                                  inline script and style (by SHA-256) */

#endif
