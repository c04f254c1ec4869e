/* allowlist.h - the read-only commands a generated shell command may run without asking. A
 * command qualifies only when every part of its pipeline starts with an allowlisted program and
 * nothing in it can write, chain or substitute: no redirection, no ; & && ||, no $ or backquotes,
 * no parentheses or braces, no newline, and find without its acting options (-exec, -delete ...).
 * The check is on characters, not shell grammar, so it errs towards asking: `grep ">" f` asks. */
#ifndef SNIPER_AGENT_ALLOWLIST_H
#define SNIPER_AGENT_ALLOWLIST_H

#include <stdbool.h>

/* True when cmd may run without the user's consent. */
bool allowlist_is_read_only(const char *cmd);

#endif
