/* agent/main.c - `sniper`, the agent CLI. Not built yet: its issue (the agent that routes requests
 * to search, shell or chat over sniperd's HTTP API) comes after the daemon. Until then it says so. */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: sniper [--server URL] [\"request\"]\n");
        printf("the agent is not built yet; use sniperd's one-shot mode: sniperd -m MODEL -p TEXT\n");
        return 0;
    }
    fprintf(stderr, "sniper: the agent is not built yet (see the project's issues); "
                    "use `sniperd -m MODEL -p TEXT` for now\n");
    return 2;
}
