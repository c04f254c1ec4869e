/* paths.h - small filesystem helpers: the agent's files (history, grades, saved chats) and the
 * models directory (hub.c). */
#ifndef SNIPER_AGENT_PATHS_H
#define SNIPER_AGENT_PATHS_H

/* Creates the directories leading to path (mode 0700), like mkdir -p of its dirname. Returns 0 or
 * a negative errno. */
int paths_make_parent(const char *path);

#endif
