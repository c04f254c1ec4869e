/* commands.h - the slash commands: /agent /raw /search /model /context /bench /stats /cost /good
 * /bad /improve /clear /save /load /system /help /quit (and /exit); "/" alone lists them. Each
 * prints its result or one error line and returns; none ends the program except /quit, which sets
 * session->quit. */
#ifndef SNIPER_AGENT_COMMANDS_H
#define SNIPER_AGENT_COMMANDS_H

#include "session.h"

#include <stdbool.h>

/* Runs line (starting with '/'). Returns 0, or a negative error that was already printed
 * (-EINVAL for an unknown command or bad arguments). */
int commands_run(struct session *s, const char *line);

/* True when name is a valid context name: [A-Za-z0-9._-]{1,64}, not starting with a dot. */
bool commands_context_name_ok(const char *name);

#endif
