/* defaults.h - what sniperd and the agent must agree on without a flag: the port the daemon serves
 * and the agent calls (tests/cli.sh checks that both binaries' --help say the same). */
#ifndef SNIPER_DEFAULTS_H
#define SNIPER_DEFAULTS_H

#define SNIPER_PORT 8000
#define SNIPER_STR_(x) #x
#define SNIPER_STR(x) SNIPER_STR_(x)
#define SNIPER_SERVER_URL "http://127.0.0.1:" SNIPER_STR(SNIPER_PORT) /* the agent's default */

#endif
