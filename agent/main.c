/* main.c - `sniper`, the agent CLI: settings from defaults, the config file, the environment and
 * the command line (in that order of precedence, last wins), then one request (one-shot), the
 * REPL, `sniper top` (the daemon's stats as a live dashboard) or `sniper pull` (a model from the
 * Hugging Face hub into the models directory). The only file of the agent that exits; Ctrl-C only
 * raises the cancel flag. */
#include "config.h"
#include "defaults.h"
#include "http_client.h"
#include "hub.h"
#include "input.h"
#include "repl.h"
#include "session.h"
#include "top.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t cancel_flag;

static void on_sigint(int sig) {
    (void)sig;
    cancel_flag = 1;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: sniper [--server URL] [--api-key KEY] [--model NAME] [--yes] [--raw]\n"
            "              [--config FILE] [\"one-shot request\"]\n"
            "       sniper [--server URL] [--api-key KEY] top [--once] [--server URL]\n"
            "              [--api-key KEY]\n"
            "       sniper pull USER/REPO[:QUANT] [--dir DIR] [--offline]\n"
            "  --server URL    the OpenAI-compatible server (sniperd), default "
            SNIPER_SERVER_URL "\n"
            "  --api-key KEY   sent as Authorization: Bearer KEY\n"
            "  --model NAME    the model to ask (default: the first the server lists)\n"
            "  --yes           run generated shell commands without asking\n"
            "  --raw           no routing: every request is plain chat\n"
            "  --config FILE   settings file (default ~/.config/sniper/agent.json)\n"
            "Environment: SNIPER_SERVER SNIPER_API_KEY SNIPER_MODEL SNIPER_SEARCH_BACKEND\n"
            "SNIPER_SEARCH_URL SNIPER_TIMEOUT SNIPER_CONFIG. Without a request: an interactive\n"
            "session (/help lists its commands); piped input is read a line at a time.\n"
            "`sniper top`: the server's /v1/stats as a dashboard redrawn every second (q or\n"
            "Ctrl-C quits); --once prints one snapshot and exits.\n"
            "`sniper pull`: downloads the GGUF file(s) of QUANT (default " HUB_DEFAULT_QUANT ") of a\n"
            "Hugging Face repo into DIR/USER/REPO (default ~/.cache/sniper/models, or\n"
            "SNIPER_MODELS_DIR), resuming a partial download, checking the sha256, and prints the\n"
            "path to pass to sniperd -m. HF_TOKEN for gated repos, HF_ENDPOINT for a mirror,\n"
            "--offline (HF_HUB_OFFLINE=1): only what is in the cache.\n");
}

/* argv[optind..] joined with spaces into a malloc'd string, or NULL when there is none. */
static char *join_args(int argc, char **argv, int first) {
    size_t n = 0;
    for (int i = first; i < argc; i++)
        n += strlen(argv[i]) + 1;
    if (n == 0)
        return NULL;
    char *s = calloc(n, 1);
    for (int i = first; s && i < argc; i++) {
        strcat(s, argv[i]);
        if (i + 1 < argc)
            strcat(s, " ");
    }
    return s;
}

/* Parses the command line into c (after the file and environment). Returns 0, 1 for --help, or
 * -1 on a usage error. */
static int parse_args(int argc, char **argv, struct agent_config *c, const char **config_path) {
    static const struct option opts[] = {
        { "server", required_argument, NULL, 's' }, { "api-key", required_argument, NULL, 'k' },
        { "model", required_argument, NULL, 'm' },  { "yes", no_argument, NULL, 'y' },
        { "raw", no_argument, NULL, 'r' },          { "config", required_argument, NULL, 'c' },
        { "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 },
    };
    int o;
    optind = 1;
    while ((o = getopt_long(argc, argv, "+s:k:m:yc:h", opts, NULL)) != -1) {
        switch (o) {
        case 's': config_set_str(&c->server, optarg); break;
        case 'k': config_set_str(&c->api_key, optarg); break;
        case 'm': config_set_str(&c->model, optarg); break;
        case 'y': c->yes = true; break;
        case 'r': c->raw = true; break;
        case 'c': *config_path = optarg; break;
        case 'h': return 1;
        default: return -1;
        }
    }
    return 0;
}

/* Parses the arguments after "top" (argv[0] is "top") into c and *once. Returns 0, 1 for --help,
 * or -1 on a usage error. */
static int parse_top_args(int argc, char **argv, struct agent_config *c, bool *once) {
    static const struct option opts[] = {
        { "server", required_argument, NULL, 's' }, { "api-key", required_argument, NULL, 'k' },
        { "once", no_argument, NULL, '1' },         { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int o;
    optind = 1;
    while ((o = getopt_long(argc, argv, "+s:k:h", opts, NULL)) != -1) {
        switch (o) {
        case 's': config_set_str(&c->server, optarg); break;
        case 'k': config_set_str(&c->api_key, optarg); break;
        case '1': *once = true; break;
        case 'h': return 1;
        default: return -1;
        }
    }
    return optind < argc ? -1 : 0;
}

/* `sniper top`: returns the exit status. */
static int run_top(const struct agent_config *cfg, bool once) {
    /* a stats request is small: a server that takes longer than 10 s shows as an error */
    double timeout_s = cfg->timeout_s > 0 && cfg->timeout_s < 10 ? cfg->timeout_s : 10;
    struct http_client hc = {
        .api_key = cfg->api_key, .timeout_s = timeout_s,
        .connect_timeout_s = cfg->connect_timeout_s, .cancel = &cancel_flag,
    };
    struct llm l;
    char err[512] = "";
    if (llm_init(&l, cfg->server, NULL, &hc) < 0) {
        fprintf(stderr, "sniper: out of memory\n");
        return 1;
    }
    struct top_opts o = { .llm = &l, .server = cfg->server, .once = once, .interval_s = 1,
                          .cancel = &cancel_flag, .out = stdout, .in_fd = STDIN_FILENO };
    int rc = top_run(&o, err, sizeof(err));
    if (rc < 0)
        fprintf(stderr, "sniper: %s\n", err);
    llm_release(&l);
    return rc < 0 ? 1 : 0;
}

/* `sniper pull REF [--dir DIR] [--offline]` (argv[0] is "pull"): returns the exit status. */
static int run_pull(int argc, char **argv) {
    static const struct option opts[] = {
        { "dir", required_argument, NULL, 'd' }, { "offline", no_argument, NULL, 'o' },
        { "help", no_argument, NULL, 'h' },      { NULL, 0, NULL, 0 },
    };
    struct hub_opts o;
    char path[HUB_PATH_MAX], err[1024] = "";
    int c;
    hub_opts_from_env(&o);
    o.cancel = &cancel_flag;
    optind = 1;
    while ((c = getopt_long(argc, argv, "+d:h", opts, NULL)) != -1) {
        if (c == 'd') {
            snprintf(o.models_dir, sizeof(o.models_dir), "%s", optarg);
        } else if (c == 'o') {
            o.offline = true;
        } else {
            usage(c == 'h' ? stdout : stderr);
            return c == 'h' ? 0 : 2;
        }
    }
    if (optind + 1 != argc) {
        usage(stderr);
        return 2;
    }
    if (hub_pull(&o, argv[optind], path, sizeof(path), err, sizeof(err)) < 0) {
        fprintf(stderr, "sniper pull: %s\n", err);
        return 1;
    }
    printf("%s\n", path);
    return 0;
}

/* --config must be known before the file is read, and the file before the other flags apply. */
static const char *find_config_flag(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            break;
        if ((strcmp(argv[i], "--config") == 0 || strcmp(argv[i], "-c") == 0) && i + 1 < argc)
            return argv[i + 1];
        if (strncmp(argv[i], "--config=", 9) == 0)
            return argv[i] + 9;
    }
    return NULL;
}

int main(int argc, char **argv) {
    struct agent_config cfg;
    struct input in;
    struct session s;
    char err[512] = "";
    const char *config_path = find_config_flag(argc, argv);
    int status = 2;
    memset(&in, 0, sizeof(in));
    memset(&s, 0, sizeof(s));
    if (config_init(&cfg) < 0) {
        fprintf(stderr, "sniper: out of memory\n");
        return 1;
    }
    if (config_load_file(&cfg, config_path, err, sizeof(err)) < 0 ||
        config_apply_env(&cfg, err, sizeof(err)) < 0) {
        fprintf(stderr, "sniper: %s\n", err);
        goto out;
    }
    int pa = parse_args(argc, argv, &cfg, &config_path);
    if (pa != 0) {
        usage(pa > 0 ? stdout : stderr);
        status = pa > 0 ? 0 : 2;
        goto out;
    }
    bool top = optind < argc && strcmp(argv[optind], "top") == 0, once = false;
    bool pull = optind < argc && strcmp(argv[optind], "pull") == 0;
    if (top && (pa = parse_top_args(argc - optind, argv + optind, &cfg, &once)) != 0) {
        usage(pa > 0 ? stdout : stderr);
        status = pa > 0 ? 0 : 2;
        goto out;
    }
    config_normalize_server(&cfg);
    struct sigaction sa = { .sa_handler = on_sigint };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    if (top) { /* the dashboard restores the terminal on these too */
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
    }
    signal(SIGPIPE, SIG_IGN);
    status = 1;
    if (http_global_init() < 0) {
        fprintf(stderr, "sniper: cannot initialise libcurl\n");
        goto out;
    }
    if (top || pull) {
        status = top ? run_top(&cfg, once) : run_pull(argc - optind, argv + optind);
        http_global_cleanup();
        goto out;
    }
    char *request = join_args(argc, argv, optind);
    if (input_init(&in, request ? NULL : cfg.history_path, &cancel_flag) < 0 ||
        session_init(&s, &cfg, &in, &cancel_flag) < 0) {
        fprintf(stderr, "sniper: out of memory\n");
        free(request);
        goto out_http;
    }
    status = (request ? repl_line(&s, request) : repl_run(&s)) < 0 ? 1 : 0;
    free(request);
out_http:
    session_release(&s);
    input_release(&in);
    http_global_cleanup();
out:
    config_release(&cfg);
    return status;
}
