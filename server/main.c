/* server/main.c - `sniperd`: the HTTP daemon (no prompt given: serve the OpenAI-compatible API,
 * server/http/), or the one-shot mode (-p / -f / --bench-prompt: run the prompt, print the
 * completion and a timing line, and on request the prompt's tokens, logits or the generated ids).
 * Only this file may exit(). */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "api.h"
#include "budget.h"
#include "chat.h"
#include "clock.h"
#include "defaults.h"
#include "pool.h"
#include "engine.h"
#include "gpu.h"
#include "expert_cache.h"
#include "gguf.h"
#include "hub.h"
#include "model.h"
#include "procstat.h"
#include "replay.h"
#include "rng.h"
#include "sampler.h"
#include "scheduler.h"
#include "server.h"
#include "tokenizer.h"
#include "units.h"

struct options {
    const char *model;
    const char *prompt;
    const char *prompt_file;
    int32_t n_predict;
    struct sampler_params sp;
    struct engine_params ep;
    bool tokenize;
    const char *dump_logits;
    const char *dump_tokens;
    uint64_t ram_budget; /* bytes; 0: the whole model in RAM */
    const char *gpu;     /* --gpu: auto (default), none, or a device's number */
    uint64_t gpu_budget; /* --gpu-budget: device bytes the model may use; 0: the device's */
    struct gpu *gpu_dev; /* the device opened (main), NULL: the CPU */
    int32_t bench_prompt; /* > 0: a prompt of this many pseudo-random ids instead of text */
    const char *route_replay; /* a route trace the moe layers route by (one-shot benchmarks) */
    struct expert_cache_options cache; /* with ram_budget: how experts are read */
    /* the daemon */
    const char *host;
    int port;
    const char *api_key;
    const char *alias;
    const char *chat_template;
    const char *context_dir;
    struct s3_config s3;
    int queue;
    int parallel;        /* the daemon's slots (sequences decoded side by side) */
    const char *models_dir;  /* serve every *.gguf there, loaded on demand */
    const json_t *models;    /* the config's "models" list (borrowed from the config) */
    double load_timeout;     /* seconds a request waits for its model to load */
    uint64_t max_body;
    int max_connections;
    int max_per_ip;
    double read_timeout_s;
    const char *replica_id;  /* NULL: the host's name */
    bool upload_on_save;     /* a saved context is also put to the object store */
    double drain_timeout;    /* seconds SIGTERM waits for the requests running; 0: none */
};

static void usage(FILE *f) {
    fprintf(f,
            "usage: sniperd -m MODEL [options]              serve the OpenAI-compatible API\n"
            "       sniperd -m MODEL (-p TEXT | -f FILE | --bench-prompt N) [options]\n"
            "                                               run one prompt and exit\n"
            "\n"
            "The model and the engine (both modes):\n"
            "  -m, --model PATH          GGUF model (qwen3moe, qwen3, llama, qwen35moe, qwen35,\n"
            "                            gpt-oss; any file of a split model), or hf:USER/REPO[:QUANT]\n"
            "                            (from Hugging Face into ~/.cache/sniper/models: sniper pull)\n"
            "  -t, --threads N           threads (default: the online CPUs)\n"
            "      --ctx-size N          KV cache positions (default: min(model's, 4096))\n"
            "  -b, --batch N             prompt tokens per forward step (default 512)\n"
            "      --kv-type TYPE        f32 | f16 (default) | q8_0 | q4_0 (quantized: a half and a\n"
            "                            quarter of f16's RAM, not bit-exact with f16)\n"
            "      --ram-budget SIZE     bound the process to SIZE (e.g. 4G): routed experts stay on\n"
            "                            disk and are read into a cache of what is left (a dense\n"
            "                            model's FFN matrices likewise)\n"
            "      --gpu SPEC            auto (default: the first discrete GPU, else an integrated\n"
            "                            one) | none (the CPU) | N (Vulkan device N, as vulkaninfo\n"
            "                            --summary numbers them); a model in RAM that fits runs\n"
            "                            every step there, with the CPU's logits bit for bit\n"
            "                            ($SNIPER_GPU when not given)\n"
            "      --gpu-budget SIZE     device memory the model may use (default: all of it)\n"
            "      --prefetch WHEN       with --ram-budget: read the next layer's guessed experts\n"
            "                            ahead: prefill (default) | always | off\n"
            "      --io KIND             with --ram-budget: io_uring (default) | threads (pread)\n"
            "      --io-depth N          with --ram-budget: reads in flight (default 32)\n"
            "      --checkpoints N       hybrid models (Qwen3.5): recurrent-state checkpoints kept\n"
            "                            for prompt-cache reuse, 1..64 (default 4)\n"
            "      --checkpoint-every N  hybrid models: also one every N positions (default 512;\n"
            "                            0: only at prompt ends and message starts)\n"
            "  Lossy speed-ups (off by default; their quality cost: docs/benchmarks.md):\n"
            "      --moe-top-k K         K experts per token instead of the model's\n"
            "      --cache-bias R        with --ram-budget: a chosen expert not in the cache gives\n"
            "                            way to a cached one with at least R times its probability\n"
            "\n"
            "The daemon (no prompt): /v1/chat/completions, /v1/completions, /v1/models, /health,\n"
            "/v1/stats, /metrics, /v1/context and the web UI at / (docs/api.md).\n"
            "      --host ADDR           address to bind (default 127.0.0.1; any other needs\n"
            "                            --api-key)\n"
            "      --port N              (default %d; 0: any free port, printed)\n"
            "      --api-key KEY         require Authorization: Bearer KEY (or $SNIPER_API_KEY)\n"
            "      --alias NAME          the model id /v1/models reports (default: the model's\n"
            "                            name)\n"
            "      --chat-template NAME  auto (default: from the model's tokenizer.chat_template)\n"
            "                            | chatml | qwen35 | llama3 | harmony | gemma4\n"
            "                            | gemma4-interleaved\n"
            "      --context-dir DIR     where /v1/context keeps contexts (default\n"
            "                            ~/.local/share/sniper/contexts)\n"
            "      --s3-endpoint URL     object store for context upload/download (also\n"
            "      --s3-bucket NAME      $SNIPER_S3_ENDPOINT, _BUCKET, _ACCESS_KEY, _SECRET_KEY,\n"
            "      --s3-access-key KEY   _REGION, or the R2_* names); region default \"auto\"\n"
            "      --s3-secret-key KEY\n"
            "      --s3-region REGION\n"
            "      --models-dir DIR      serve every *.gguf in DIR (ids: the file names), loaded on\n"
            "                            demand within the RAM budget, the least recently used idle\n"
            "                            model unloaded first (with -m: that one is the default)\n"
            "      --load-timeout S      seconds a request waits for its model to load (default\n"
            "                            300)\n"
            "      --parallel N          slots: requests decoded side by side, each with its own\n"
            "                            KV cache of the context's size (default 1, at most %d)\n"
            "      --queue N             requests waiting beyond the running ones (default 16;\n"
            "                            more get 503)\n"
            "      --max-body SIZE       largest request body (default 8M; larger get 413)\n"
            "      --max-connections N   open connections in all (default %d)\n"
            "      --max-connections-per-ip N\n"
            "                            open connections from one client address (default %d;\n"
            "                            0: no limit, e.g. behind a load balancer)\n"
            "      --replica-id ID       this daemon among replicas behind a balancer: the\n"
            "                            X-Sniper-Replica header, /v1/stats and /metrics\n"
            "                            (default: the host's name)\n"
            "      --drain-timeout S     on SIGTERM/SIGINT, refuse new requests (503, /health\n"
            "                            \"draining\") and wait up to S seconds for the running\n"
            "                            ones (default 60; 0: stop at once)\n"
            "      --upload-on-save      a context saved is also uploaded to the object store\n"
            "      --read-timeout S      seconds a client has to send a whole request, from its\n"
            "                            connection or its previous reply (default %d); a reply\n"
            "                            may stream for as long as it takes\n"
            "  -c, --config FILE         these settings and the engine's as JSON\n"
            "                            (config.example.json lists every key); flags override it\n"
            "\n"
            "One prompt (-p, -f or --bench-prompt): print the completion and a timing line.\n"
            "  -p, --prompt TEXT         prompt text (special tokens such as <|im_start|> are "
            "recognised)\n"
            "  -f, --file PATH           read the prompt text from a file\n"
            "  -n, --n-predict N         tokens to generate (default 64; 0: none)\n"
            "      --temp T              temperature (default 0.8; 0: greedy)\n"
            "      --top-k N             (default 40; 0: off)\n"
            "      --top-p P             (default 0.95; 1: off)\n"
            "      --min-p P             (default 0.05; 0: off)\n"
            "      --repeat-penalty R    (default 1: off)\n"
            "      --repeat-last-n N     (default 64)\n"
            "      --presence-penalty P  (default 0)\n"
            "      --frequency-penalty P (default 0)\n"
            "      --seed N              (default 0)\n"
            "      --bench-prompt N      benchmark: use N pseudo-random token ids as the prompt\n"
            "      --route-replay FILE   benchmark: route every moe layer as the route trace FILE\n"
            "                            did (../shared/fixtures/routing); the text is meaningless\n"
            "      --tokenize            print the prompt's token ids and exit (vocab-only GGUFs "
            "work)\n"
            "      --dump-logits FILE    write the logits after each prompt token (float32 "
            "[n_prompt][n_vocab])\n"
            "      --dump-tokens FILE    write {\"prompt_tokens\":[...],\"generated_tokens\":[...]}\n"
            "\n"
            "  -h, --help                this text\n",
            SNIPER_PORT, ENGINE_MAX_SEQ, HTTP_MAX_CONNECTIONS, HTTP_MAX_PER_IP, HTTP_READ_TIMEOUT_S);
}

static int parse_int(const char *flag, const char *s, long min, long max, long *out) {
    long long v;
    if (units_parse_int(s, min, max, &v) < 0) {
        fprintf(stderr, "sniperd: %s wants an integer in [%ld, %ld], got \"%s\"\n", flag, min, max,
                s);
        return -EINVAL;
    }
    *out = (long)v;
    return 0;
}

/* A size such as 4G or 512M (see units.h). */
static int parse_bytes(const char *flag, const char *s, uint64_t *out) {
    if (units_parse_bytes(s, out) < 0) {
        fprintf(stderr, "sniperd: %s wants a size such as 4G or 512M, got \"%s\"\n", flag, s);
        return -EINVAL;
    }
    return 0;
}

static int parse_float(const char *flag, const char *s, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || v != v) {
        fprintf(stderr, "sniperd: %s wants a number, got \"%s\"\n", flag, s);
        return -EINVAL;
    }
    *out = v;
    return 0;
}

/* A replica id goes into a header, JSON and a metric label as it is: 1 to 63 of [A-Za-z0-9._-]. */
static const char REPLICA_ID_CHARS[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                       "0123456789._-";

static bool replica_id_ok(const char *id) {
    size_t n = strlen(id);
    return n > 0 && n < 64 && strspn(id, REPLICA_ID_CHARS) == n;
}

/* Parses argv into o. Returns 0, 1 for --help, or a negative error (message printed). */
static int parse_args(int argc, char **argv, struct options *o, bool final) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return 1;
        if ((!strcmp(a, "-c") || !strcmp(a, "--config")) && i + 1 < argc) {
            i++; /* read before the flags (load_config): the flags override it */
            continue;
        }
        if (!strcmp(a, "-c") || !strcmp(a, "--config")) {
            fprintf(stderr, "sniperd: %s wants a file (see --help)\n", a);
            return -EINVAL;
        }
        if (!strcmp(a, "--tokenize")) {
            o->tokenize = true;
            continue;
        }
        if (!strcmp(a, "--upload-on-save")) {
            o->upload_on_save = true;
            continue;
        }
        if (a[0] != '-') {
            fprintf(stderr, "sniperd: unexpected argument \"%s\" (the model is -m PATH; see "
                            "--help)\n", a);
            return -EINVAL;
        }
        const bool missing = i + 1 >= argc; /* known options then say they want a value */
        const char *v = missing ? "" : argv[++i];
        long n = 0;
        int rc = 0;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            o->model = v;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            o->prompt = v;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            o->prompt_file = v;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            rc = parse_int(a, v, 0, 1 << 24, &n);
            o->n_predict = (int32_t)n;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            rc = parse_int(a, v, 0, 1024, &n); /* 0: the online CPUs */
            o->ep.n_threads = (int)n;
        } else if (!strcmp(a, "--ctx-size")) {
            rc = parse_int(a, v, 1, 1 << 24, &n);
            o->ep.n_ctx = (int32_t)n;
        } else if (!strcmp(a, "-b") || !strcmp(a, "--batch")) {
            rc = parse_int(a, v, 1, 4096, &n);
            o->ep.n_batch = (int32_t)n;
        } else if (!strcmp(a, "--kv-type")) {
            o->ep.kv_type = engine_kv_type_named(v);
            if (o->ep.kv_type == QTYPE_COUNT) {
                fprintf(stderr, "sniperd: --kv-type \"%s\" is not supported ("
                        ENGINE_KV_TYPE_NAMES ")\n", v);
                rc = -EINVAL;
            }
        } else if (!strcmp(a, "--temp")) {
            rc = parse_float(a, v, &o->sp.temp);
        } else if (!strcmp(a, "--top-k")) {
            rc = parse_int(a, v, 0, 1 << 24, &n);
            o->sp.top_k = (int32_t)n;
        } else if (!strcmp(a, "--top-p")) {
            rc = parse_float(a, v, &o->sp.top_p);
        } else if (!strcmp(a, "--min-p")) {
            rc = parse_float(a, v, &o->sp.min_p);
        } else if (!strcmp(a, "--repeat-penalty")) {
            rc = parse_float(a, v, &o->sp.repeat_penalty);
        } else if (!strcmp(a, "--repeat-last-n")) {
            rc = parse_int(a, v, 0, 1 << 20, &n);
            o->sp.repeat_last_n = (int32_t)n;
        } else if (!strcmp(a, "--presence-penalty")) {
            rc = parse_float(a, v, &o->sp.presence_penalty);
        } else if (!strcmp(a, "--frequency-penalty")) {
            rc = parse_float(a, v, &o->sp.frequency_penalty);
        } else if (!strcmp(a, "--seed")) {
            rc = parse_int(a, v, 0, __LONG_MAX__, &n);
            o->sp.seed = (uint64_t)n;
        } else if (!strcmp(a, "--dump-logits")) {
            o->dump_logits = v;
        } else if (!strcmp(a, "--dump-tokens")) {
            o->dump_tokens = v;
        } else if (!strcmp(a, "--route-replay")) {
            o->route_replay = v;
        } else if (!strcmp(a, "--bench-prompt")) {
            rc = parse_int(a, v, 1, 1 << 24, &n);
            o->bench_prompt = (int32_t)n;
        } else if (!strcmp(a, "--ram-budget")) {
            if (!strcmp(v, "0")) /* none: everything in RAM */
                o->ram_budget = 0;
            else
                rc = parse_bytes(a, v, &o->ram_budget);
        } else if (!strcmp(a, "--gpu")) {
            o->gpu = v;
        } else if (!strcmp(a, "--gpu-budget")) {
            rc = parse_bytes(a, v, &o->gpu_budget);
        } else if (!strcmp(a, "--prefetch")) {
            if (!strcmp(v, "prefill")) {
                o->ep.prefetch = ENGINE_PREFETCH_PREFILL;
            } else if (!strcmp(v, "always")) {
                o->ep.prefetch = ENGINE_PREFETCH_ALWAYS;
            } else if (!strcmp(v, "off")) {
                o->ep.prefetch = ENGINE_PREFETCH_OFF;
            } else {
                fprintf(stderr, "sniperd: --prefetch wants prefill, always or off, got \"%s\"\n", v);
                rc = -EINVAL;
            }
        } else if (!strcmp(a, "--io")) {
            if (!strcmp(v, "io_uring")) {
                o->cache.io = EXPERT_IO_URING;
            } else if (!strcmp(v, "threads")) {
                o->cache.io = EXPERT_IO_THREADS;
            } else {
                fprintf(stderr, "sniperd: --io wants io_uring or threads, got \"%s\"\n", v);
                rc = -EINVAL;
            }
        } else if (!strcmp(a, "--host")) {
            o->host = v;
        } else if (!strcmp(a, "--port")) {
            rc = parse_int(a, v, 0, 65535, &n);
            o->port = (int)n;
        } else if (!strcmp(a, "--api-key")) {
            o->api_key = v;
        } else if (!strcmp(a, "--alias")) {
            o->alias = v;
        } else if (!strcmp(a, "--context-dir")) {
            o->context_dir = v;
        } else if (!strcmp(a, "--s3-endpoint")) {
            snprintf(o->s3.endpoint, sizeof(o->s3.endpoint), "%s", v);
        } else if (!strcmp(a, "--s3-bucket")) {
            snprintf(o->s3.bucket, sizeof(o->s3.bucket), "%s", v);
        } else if (!strcmp(a, "--s3-access-key")) {
            snprintf(o->s3.access_key, sizeof(o->s3.access_key), "%s", v);
        } else if (!strcmp(a, "--s3-secret-key")) {
            snprintf(o->s3.secret_key, sizeof(o->s3.secret_key), "%s", v);
        } else if (!strcmp(a, "--s3-region")) {
            snprintf(o->s3.region, sizeof(o->s3.region), "%s", v);
        } else if (!strcmp(a, "--chat-template")) {
            if (strcmp(v, "auto") != 0 && chat_family_from_name(v) < 0) {
                fprintf(stderr, "sniperd: --chat-template wants auto, chatml, qwen35, llama3, "
                                "harmony, gemma4 or gemma4-interleaved, got \"%s\"\n", v);
                rc = -EINVAL;
            }
            o->chat_template = strcmp(v, "auto") != 0 ? v : NULL;
        } else if (!strcmp(a, "--queue")) {
            rc = parse_int(a, v, 1, 4096, &n);
            o->queue = (int)n;
        } else if (!strcmp(a, "--parallel")) {
            rc = parse_int(a, v, 1, ENGINE_MAX_SEQ, &n);
            o->parallel = (int)n;
        } else if (!strcmp(a, "--models-dir")) {
            o->models_dir = v[0] ? v : NULL;
        } else if (!strcmp(a, "--load-timeout")) {
            rc = parse_int(a, v, 1, 86400, &n);
            o->load_timeout = (double)n;
        } else if (!strcmp(a, "--max-body")) {
            rc = parse_bytes(a, v, &o->max_body);
        } else if (!strcmp(a, "--max-connections")) {
            rc = parse_int(a, v, 1, 65536, &n);
            o->max_connections = (int)n;
        } else if (!strcmp(a, "--max-connections-per-ip")) {
            rc = parse_int(a, v, 0, 65536, &n); /* 0: no limit */
            o->max_per_ip = (int)n;
        } else if (!strcmp(a, "--replica-id")) {
            o->replica_id = v[0] ? v : NULL; /* "": the host's name */
            rc = !v[0] || replica_id_ok(v) ? 0 : -EINVAL;
            if (rc)
                fprintf(stderr, "sniperd: --replica-id wants 1 to 63 of A-Z a-z 0-9 . _ -\n");
        } else if (!strcmp(a, "--drain-timeout")) {
            rc = parse_int(a, v, 0, 3600, &n);
            o->drain_timeout = (double)n;
        } else if (!strcmp(a, "--read-timeout")) {
            rc = parse_int(a, v, 1, 3600, &n);
            o->read_timeout_s = (double)n;
        } else if (!strcmp(a, "--moe-top-k")) {
            rc = parse_int(a, v, 0, 1024, &n); /* 0: the model's */
            o->ep.moe_top_k = (int32_t)n;
        } else if (!strcmp(a, "--cache-bias")) {
            rc = parse_float(a, v, &o->ep.cache_bias);
            if (rc == 0 && !(o->ep.cache_bias >= 0.0f && o->ep.cache_bias <= 1.0f)) {
                fprintf(stderr, "sniperd: --cache-bias wants a ratio in [0, 1] (0: off), got "
                        "\"%s\"\n", v);
                rc = -EINVAL;
            }
        } else if (!strcmp(a, "--checkpoints")) {
            rc = parse_int(a, v, 1, 64, &n);
            o->ep.n_checkpoints = (int32_t)n;
        } else if (!strcmp(a, "--checkpoint-every")) {
            rc = parse_int(a, v, 0, 1 << 24, &n);
            o->ep.checkpoint_every = (int32_t)n;
        } else if (!strcmp(a, "--io-depth")) {
            rc = parse_int(a, v, 1, 1024, &n);
            o->cache.io_depth = (int)n;
        } else {
            fprintf(stderr, "sniperd: unknown option \"%s\" (see --help)\n", a);
            return -EINVAL;
        }
        if (rc < 0)
            return rc;
        if (missing) {
            fprintf(stderr, "sniperd: %s wants a value (see --help)\n", a);
            return -EINVAL;
        }
    }
    if (!final)
        return 0;
    int n_prompts = (o->prompt != NULL) + (o->prompt_file != NULL) + (o->bench_prompt > 0);
    if (!o->model && (n_prompts > 0 || o->tokenize || (!o->models_dir && !o->models))) {
        fprintf(stderr, "sniperd: no model: pass -m MODEL.gguf%s\n",
                n_prompts > 0 || o->tokenize ? "" : " (or --models-dir DIR)");
        return -EINVAL;
    }
    if (n_prompts > 1 || (o->tokenize && n_prompts == 0)) {
        fprintf(stderr, "sniperd: pass at most one of -p TEXT, -f FILE and --bench-prompt N "
                        "(none: serve the API)\n");
        return -EINVAL;
    }
    if (o->route_replay && (n_prompts == 0 || o->ep.cache_bias > 0.0f)) {
        fprintf(stderr, "sniperd: --route-replay is for one prompt (-p, -f or --bench-prompt), "
                        "never the daemon, and without --cache-bias\n");
        return -EINVAL;
    }
    return 0;
}

/* Reads the prompt text (from -p or -f) into a malloc'd buffer. */
static char *prompt_text(const struct options *o, size_t *len) {
    if (o->prompt) {
        *len = strlen(o->prompt);
        return strdup(o->prompt);
    }
    FILE *f = fopen(o->prompt_file, "rb");
    if (!f) {
        fprintf(stderr, "sniperd: cannot open prompt file \"%s\": %s\n", o->prompt_file,
                strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    if (buf && ferror(f)) {
        fprintf(stderr, "sniperd: reading prompt file \"%s\" failed\n", o->prompt_file);
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = n;
    return buf;
}

/* A benchmark prompt: n ids spread over the vocabulary (rng_bench_ids). */
static int32_t *bench_tokens(int32_t n, int32_t n_vocab) {
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    if (ids)
        rng_bench_ids(ids, n, n_vocab);
    return ids;
}

/* Tokenizes the prompt: BOS when the model asks for it, special tokens recognised. */
static int32_t *prompt_tokens(const struct tokenizer *tk, const struct options *o, size_t *n) {
    if (o->bench_prompt > 0) {
        *n = (size_t)o->bench_prompt;
        return bench_tokens(o->bench_prompt, tokenizer_n_vocab(tk));
    }
    size_t len;
    char *text = prompt_text(o, &len);
    if (!text)
        return NULL;
    size_t n_text;
    int32_t *ids = tokenizer_encode(tk, text, len, true, &n_text);
    free(text);
    if (!ids)
        return NULL;
    bool bos = tokenizer_add_bos(tk) && tokenizer_bos(tk) >= 0;
    int32_t *all = malloc((n_text + 1) * sizeof(int32_t));
    if (!all) {
        free(ids);
        return NULL;
    }
    if (bos)
        all[0] = tokenizer_bos(tk);
    memcpy(all + bos, ids, n_text * sizeof(int32_t));
    free(ids);
    *n = n_text + bos;
    return all;
}

static int run_tokenize(const struct options *o) {
    char err[512];
    struct gguf *g = gguf_open(o->model, err, sizeof(err));
    if (!g) {
        fprintf(stderr, "sniperd: %s\n", err);
        return 1;
    }
    struct tokenizer *tk = tokenizer_new(g, err, sizeof(err));
    gguf_free(g);
    if (!tk) {
        fprintf(stderr, "sniperd: %s\n", err);
        return 1;
    }
    size_t n;
    int32_t *ids = prompt_tokens(tk, o, &n);
    int rc = 1;
    if (ids) {
        for (size_t i = 0; i < n; i++)
            printf(i ? " %d" : "%d", ids[i]);
        printf("\n");
        rc = 0;
    }
    free(ids);
    tokenizer_free(tk);
    return rc;
}

static int write_tokens_json(const char *path, const int32_t *p, size_t np, const int32_t *g,
                             size_t ng) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "sniperd: cannot write \"%s\": %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f, "{\"prompt_tokens\":[");
    for (size_t i = 0; i < np; i++)
        fprintf(f, i ? ",%d" : "%d", p[i]);
    fprintf(f, "],\"generated_tokens\":[");
    for (size_t i = 0; i < ng; i++)
        fprintf(f, i ? ",%d" : "%d", g[i]);
    fprintf(f, "]}\n");
    if (fclose(f) != 0) {
        fprintf(stderr, "sniperd: writing \"%s\" failed\n", path);
        return -1;
    }
    return 0;
}

/* Feeds the prompt; with dump, writes every row of logits to it. Leaves the last row in last. */
static int run_prefill(struct engine *e, const int32_t *ids, size_t n, int32_t n_vocab, FILE *dump,
                       float *rows, int32_t n_batch, float *last) {
    for (size_t i = 0; i < n; i += (size_t)n_batch) {
        int32_t nb = (int32_t)(n - i < (size_t)n_batch ? n - i : (size_t)n_batch);
        int rc = engine_eval(e, 0, ids + i, nb, dump ? rows : last, dump != NULL);
        if (rc < 0)
            return rc;
        if (dump) {
            if (fwrite(rows, sizeof(float) * (size_t)n_vocab, (size_t)nb, dump) != (size_t)nb)
                return -EIO;
            memcpy(last, rows + (size_t)(nb - 1) * n_vocab, sizeof(float) * (size_t)n_vocab);
        }
    }
    return 0;
}

/* Hit rate of each layer's lookups over the run, first layer first. */
static void print_layer_stats(const struct expert_cache *c, int n_layer) {
    fprintf(stderr, "experts-layers: hit_rate=");
    for (int il = 0; il < n_layer; il++) {
        uint64_t h, m;
        expert_cache_layer_stats(c, il, &h, &m);
        fprintf(stderr, "%s%.2f", il ? "," : "", h + m ? (double)h / (double)(h + m) : 0.0);
    }
    fprintf(stderr, "\n");
}

/* The line checks outside the tests read: cache figures and the peak RSS. */
static void print_expert_stats(const struct expert_cache *c) {
    struct expert_cache_stats st = {0};
    if (c)
        expert_cache_get_stats(c, &st);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    uint64_t lookups = st.hits + st.misses;
    fprintf(stderr,
            "experts: hits=%llu misses=%llu hit_rate=%.3f bytes_read=%llu read_MBps=%.1f "
            "prefetch_used=%llu/%llu peak_rss_MB=%.0f\n",
            (unsigned long long)st.hits, (unsigned long long)st.misses,
            lookups ? (double)st.hits / (double)lookups : 0.0, (unsigned long long)st.bytes_read,
            st.io_busy_s > 0 ? (double)st.bytes_read / st.io_busy_s / 1e6 : 0.0,
            (unsigned long long)st.prefetch_used, (unsigned long long)st.prefetch_issued,
            (double)ru.ru_maxrss / 1024.0);
}

/* The decode phase's share of the cache figures (after minus before), per generated token, and
 * the cache's slots and eviction at its end (what bench-policy --slots replays). */
static void print_decode_stats(const struct expert_cache_stats *a,
                               const struct expert_cache_stats *b, size_t n_tokens) {
    fprintf(stderr,
            "experts-decode: tokens=%zu hits=%llu misses=%llu bytes_read=%llu io_wait_s=%.3f "
            "io_busy_s=%.3f bytes_per_token=%.0f io_wait_ms_per_token=%.1f prefetch_used=%llu/%llu "
            "slots=%d eviction=%s\n",
            n_tokens, (unsigned long long)(b->hits - a->hits),
            (unsigned long long)(b->misses - a->misses),
            (unsigned long long)(b->bytes_read - a->bytes_read), b->io_wait_s - a->io_wait_s,
            b->io_busy_s - a->io_busy_s,
            n_tokens ? (double)(b->bytes_read - a->bytes_read) / (double)n_tokens : 0.0,
            n_tokens ? 1e3 * (b->io_wait_s - a->io_wait_s) / (double)n_tokens : 0.0,
            (unsigned long long)(b->prefetch_used - a->prefetch_used),
            (unsigned long long)(b->prefetch_issued - a->prefetch_issued), b->n_slots,
            b->eviction ? b->eviction : "-");
}

/* --route-replay: opens the trace for m's shape into *out, hands it to e (routing moe_top_k
 * experts a token, 0: the model's) and says loudly that the text will be meaningless. Returns 0,
 * or -EINVAL with the message in err (a trace of another shape names both). */
static int start_replay(const char *path, const struct model *m, int32_t moe_top_k,
                        struct engine *e, struct replay **out, char *err, size_t err_len) {
    struct replay *r = replay_open(path, m->hp.n_layer, m->hp.n_expert, err, err_len);
    if (!r)
        return -EINVAL;
    const int32_t kt = replay_n_used(r);
    const int32_t used = moe_top_k > 0 ? moe_top_k : m->hp.n_expert_used;
    fprintf(stderr,
            "route-replay: ROUTING FROM THE TRACE \"%s\", NOT THE MODEL: THE OUTPUT TEXT IS "
            "MEANINGLESS (benchmark only). %d experts a token: %d from the trace%s; decode "
            "cycles through its %d tokens, each prefill step looks up its prefill's experts\n",
            path, used, used < kt ? used : kt,
            used > kt ? ", the rest the model's own most probable" : "",
            replay_n_decode_tokens(r));
    engine_set_route_replay(e, r);
    *out = r;
    return 0;
}

static int run_generate(const struct options *o) {
    char err[512];
    int rc = 1;
    double t0 = clock_now_s();
    struct model *m = model_open(o->model, o->ram_budget > 0, err, sizeof(err));
    if (!m) {
        fprintf(stderr, "sniperd: %s\n", err);
        return 1;
    }
    struct tokenizer *tk = NULL;
    struct engine *e = NULL;
    struct expert_cache *cache = NULL;
    struct sampler *s = NULL;
    struct replay *rp = NULL;
    int32_t *ids = NULL, *gen = NULL;
    float *rows = NULL, *logits = NULL;
    FILE *dump = NULL;
    size_t n_prompt = 0, n_gen = 0;
    tk = tokenizer_new(m->gguf, err, sizeof(err));
    if (!tk)
        goto fail;
    /* a budget too small for the engine is refused before its memory is touched */
    if (o->ram_budget && budget_check(m, &o->ep, o->ram_budget, err, sizeof(err)) < 0)
        goto fail;
    e = engine_new(m, &o->ep, err, sizeof(err));
    if (!e)
        goto fail;
    budget_print_memory(e, o->ep.n_checkpoints, stderr);
    if (o->route_replay &&
        start_replay(o->route_replay, m, o->ep.moe_top_k, e, &rp, err, sizeof(err)) < 0)
        goto fail;
    ids = prompt_tokens(tk, o, &n_prompt);
    const int32_t V = m->hp.n_vocab;
    const int32_t n_batch = engine_n_batch(e);
    /* rows of logits only for --dump-logits; everything touched before the budget is measured */
    size_t rows_bytes = o->dump_logits ? sizeof(float) * (size_t)V * (size_t)n_batch : 0;
    rows = o->dump_logits ? malloc(rows_bytes) : NULL;
    logits = malloc(sizeof(float) * (size_t)V);
    if (rows)
        memset(rows, 0, rows_bytes); /* calloc would leave fresh pages untouched */
    if (logits)
        memset(logits, 0, sizeof(float) * (size_t)V);
    gen = calloc((size_t)o->n_predict + 1, sizeof(int32_t));
    s = sampler_new(&o->sp, V);
    if (!ids || (o->dump_logits && !rows) || !logits || !gen || !s) {
        snprintf(err, sizeof(err), "out of memory or bad sampling parameters");
        goto fail;
    }
    if (n_prompt == 0) {
        snprintf(err, sizeof(err), "the prompt is empty");
        goto fail;
    }
    if (n_prompt + (size_t)o->n_predict > (size_t)engine_n_ctx(e)) {
        snprintf(err, sizeof(err), "prompt (%zu tokens) + -n %d exceed the context of %d",
                 n_prompt, o->n_predict, engine_n_ctx(e));
        goto fail;
    }
    err[0] = '\0';
    if (o->ram_budget &&
        !(cache = budget_cache_new(m, e, o->ram_budget, &o->cache, stderr, err, sizeof(err))))
        goto fail;
    if (!rp) /* with a cache: the experts on three levels */
        budget_place_gpu(e, o->gpu_dev, stderr);
    double t_load = clock_now_s() - t0;
    if (o->dump_logits && !(dump = fopen(o->dump_logits, "wb"))) {
        snprintf(err, sizeof(err), "cannot write \"%s\": %s", o->dump_logits, strerror(errno));
        goto fail;
    }
    double t1 = clock_now_s();
    int erc = run_prefill(e, ids, n_prompt, V, dump, rows, n_batch, logits);
    if (erc < 0) {
        snprintf(err, sizeof(err), "prefill failed: %s", strerror(-erc));
        goto fail;
    }
    double t_prefill = clock_now_s() - t1;
    for (size_t i = 0; i < n_prompt; i++)
        sampler_accept(s, ids[i]);
    struct tokenizer_stream st = {0};
    char piece[256];
    struct expert_cache_stats before = {0}, after = {0};
    if (cache)
        expert_cache_get_stats(cache, &before);
    struct engine_timing tm0, tm1;
    engine_get_timing(e, &tm0);
    double t2 = clock_now_s();
    while (n_gen < (size_t)o->n_predict) {
        int32_t tok = sampler_sample(s, logits);
        sampler_accept(s, tok);
        gen[n_gen++] = tok;
        if (tokenizer_is_eog(tk, tok))
            break;
        size_t len = tokenizer_decode_stream(tk, &st, tok, piece, sizeof(piece));
        fwrite(piece, 1, len, stdout);
        fflush(stdout);
        if (n_gen == (size_t)o->n_predict)
            break;
        if ((erc = engine_eval(e, 0, &tok, 1, logits, false)) < 0) {
            snprintf(err, sizeof(err), "decode failed: %s", strerror(-erc));
            goto fail;
        }
    }
    size_t len = tokenizer_stream_flush(&st, piece, sizeof(piece));
    fwrite(piece, 1, len, stdout);
    printf("\n");
    fflush(stdout);
    double t_decode = clock_now_s() - t2;
    fprintf(stderr,
            "timing: load %.2f s, prompt %zu tokens in %.3f s (%.2f tok/s), "
            "generated %zu tokens in %.3f s (%.2f tok/s), %d threads\n",
            t_load, n_prompt, t_prefill, (double)n_prompt / t_prefill, n_gen, t_decode,
            n_gen > 1 ? (double)(n_gen - 1) / t_decode : 0.0, engine_n_threads(e));
    engine_get_timing(e, &tm1);
    if (n_gen > 1) /* what no expert read can overlap, and the FFN's part (reads included) */
        fprintf(stderr, "compute-decode: serial_ms_per_token=%.2f ffn_ms_per_token=%.2f\n",
                1e3 * ((tm1.step_s - tm0.step_s) - (tm1.ffn_s - tm0.ffn_s)) / (double)(n_gen - 1),
                1e3 * (tm1.ffn_s - tm0.ffn_s) / (double)(n_gen - 1));
    if (cache) {
        expert_cache_get_stats(cache, &after);
        print_decode_stats(&before, &after, n_gen > 1 ? n_gen - 1 : 0);
        print_layer_stats(cache, m->hp.n_layer);
        print_expert_stats(cache);
    }
    if (o->dump_tokens && write_tokens_json(o->dump_tokens, ids, n_prompt, gen, n_gen) < 0)
        goto out;
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "sniperd: %s\n", err);
out:
    if (dump && fclose(dump) != 0 && rc == 0) {
        fprintf(stderr, "sniperd: writing \"%s\" failed\n", o->dump_logits);
        rc = 1;
    }
    free(ids);
    free(gen);
    free(rows);
    free(logits);
    sampler_free(s);
    engine_free(e);
    replay_free(rp);
    expert_cache_free(cache);
    tokenizer_free(tk);
    model_free(m);
    return rc;
}

/* Appends the flag a config key names ("ctx_size": 8192 -> "--ctx-size", "8192") to args[*k],
 * the texts kept alive in texts. Returns 0 or -EINVAL (a value that is not a string or number). */
static int config_flag(const char *key, const json_t *val, json_t *texts, char **args, size_t *k,
                       const char *path) {
    char flag[80], num[64];
    int fl = snprintf(flag, sizeof(flag), "--%s", key);
    for (int i = 2; i < fl && i < (int)sizeof(flag); i++)
        flag[i] = flag[i] == '_' ? '-' : flag[i];
    const char *v = json_string_value(val);
    if (json_is_boolean(val)) { /* a bare flag: true gives it, false leaves it out */
        if (json_is_true(val)) {
            json_array_append_new(texts, json_string(flag));
            args[(*k)++] = (char *)json_string_value(json_array_get(texts,
                                                                    json_array_size(texts) - 1));
        }
        return 0;
    }
    if (json_is_integer(val))
        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(val));
    else if (json_is_real(val))
        snprintf(num, sizeof(num), "%.17g", json_real_value(val));
    else if (!v) {
        fprintf(stderr, "sniperd: config \"%s\": \"%s\" wants a string, a number or a boolean\n",
                path, key);
        return -EINVAL;
    }
    json_array_append_new(texts, json_string(flag));
    args[(*k)++] = (char *)json_string_value(json_array_get(texts, json_array_size(texts) - 1));
    if (!v) {
        json_array_append_new(texts, json_string(num));
        v = json_string_value(json_array_get(texts, json_array_size(texts) - 1));
    }
    args[(*k)++] = (char *)v;
    return 0;
}

/* The config file (-c): a JSON object whose keys are the long flags' names with '_' for '-'
 * ("ram_budget": "4G", "port": 8000, "api_key": "..."), read before the command line so that flags
 * override it. Strings stay in *keep (free with json_decref after the run). Returns 0 or -EINVAL
 * with a message. */
static int load_config(const char *path, struct options *o, json_t **keep) {
    static const char *const refused[] = {"config",      "prompt",       "file",
                                          "bench_prompt", "route_replay", "tokenize",
                                          "dump_logits", "dump_tokens",  "help"};
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        fprintf(stderr, "sniperd: config \"%s\" line %d: %s\n", path, je.line, je.text);
        return -EINVAL;
    }
    *keep = root;
    if (!json_is_object(root)) {
        fprintf(stderr, "sniperd: config \"%s\": want a JSON object of settings\n", path);
        return -EINVAL;
    }
    size_t n = json_object_size(root), k = 1;
    char **args = calloc(2 * n + 1, sizeof(char *));
    json_t *texts = json_array(); /* owns the flag names and number texts */
    int rc = args && texts ? 0 : -ENOMEM;
    const char *key;
    json_t *val;
    if (args)
        args[0] = "sniperd";
    json_object_foreach(root, key, val) {
        if (rc < 0)
            break;
        if (!strcmp(key, "models")) { /* a list of models, read by the daemon (pool_setup) */
            if (!json_is_array(val)) {
                fprintf(stderr, "sniperd: config \"%s\": \"models\" wants a list of objects\n",
                        path);
                rc = -EINVAL;
            }
            o->models = json_array_size(val) ? val : NULL;
            continue;
        }
        for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
            if (!strcmp(key, refused[i])) {
                fprintf(stderr, "sniperd: config \"%s\": \"%s\" is not a daemon setting\n", path,
                        key);
                rc = -EINVAL;
            }
        if (rc == 0)
            rc = config_flag(key, val, texts, args, &k, path);
    }
    if (rc == 0 && (rc = parse_args((int)k, args, o, false)) != 0)
        fprintf(stderr, "sniperd: (in config \"%s\")\n", path);
    json_object_set_new(root, " texts", texts); /* freed with root */
    free(args);
    return rc == 1 ? -EINVAL : rc;
}

/* True for addresses only this machine can reach (127.0.0.0/8, ::1). */
static bool is_loopback(const char *host) {
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

/* ---- the daemon -------------------------------------------------------------------------- */

/* A served model's options from the daemon's: its slots, context, budget and how it reads. */
static struct pool_model_opts model_opts(const struct options *o) {
    struct pool_model_opts m = {.ep = o->ep, .cache = o->cache, .chat_template = o->chat_template,
                                .queue = o->queue, .ram_budget = 0};
    m.ep.n_seq = o->parallel;
    return m;
}

/* A model named for the hub ("hf:user/repo:QUANT") becomes its file in the models directory,
 * downloaded first when the cache lacks it (common/hub.h). Other names pass through. Returns 0, or
 * -1 with the reason printed. path holds HUB_PATH_MAX. */
static int model_resolve(const char **name, char *path) {
    char err[1024];
    struct hub_opts ho;
    if (!*name || !hub_ref_is(*name))
        return 0;
    hub_opts_from_env(&ho);
    if (hub_pull(&ho, *name, path, HUB_PATH_MAX, err, sizeof(err)) < 0) {
        fprintf(stderr, "sniperd: %s\n", err);
        return -1;
    }
    *name = path;
    return 0;
}

/* One entry of the config's "models" list: {"id", "path", and per-model settings named as the
 * flags}, over the daemon's options. Returns 0 or -EINVAL with a message. */
static int model_entry(const json_t *obj, const struct options *o, struct pool_model_opts *out) {
    static const char *const per_model[] = {
        "ram_budget", "ctx_size", "kv_type", "parallel", "threads", "batch", "chat_template",
        "prefetch", "io", "io_depth", "checkpoints", "checkpoint_every", "queue", "moe_top_k",
        "cache_bias"};
    const char *where = "the config's models list";
    struct options copy = *o;
    copy.ram_budget = 0; /* a model's own budget, when it names one */
    const char *id = NULL, *path = NULL, *key;
    json_t *val, *texts = json_array();
    char *args[2 * 16 + 1] = {"sniperd"};
    size_t k = 1;
    int rc = json_is_object(obj) && texts ? 0 : -EINVAL;
    json_object_foreach((json_t *)obj, key, val) {
        bool known = false;
        for (size_t i = 0; i < sizeof(per_model) / sizeof(per_model[0]) && rc == 0; i++)
            if (!strcmp(key, per_model[i]) && k + 2 < sizeof(args) / sizeof(args[0])) {
                rc = config_flag(key, val, texts, args, &k, where);
                known = true;
            }
        if (!strcmp(key, "id") || !strcmp(key, "alias"))
            known = (id = json_string_value(val)) != NULL;
        else if (!strcmp(key, "path") || !strcmp(key, "model"))
            known = (path = json_string_value(val)) != NULL;
        if (!known && rc == 0) {
            fprintf(stderr, "sniperd: %s: \"%s\" is not a model's setting (id, path, %s ...)\n",
                    where, key, per_model[0]);
            rc = -EINVAL;
        }
    }
    if (rc == 0 && !path) {
        fprintf(stderr, "sniperd: %s: every model needs a \"path\"\n", where);
        rc = -EINVAL;
    }
    char hub_path[HUB_PATH_MAX];
    if (rc == 0 && model_resolve(&path, hub_path) < 0)
        rc = -ENOENT;
    if (rc == 0 && (rc = parse_args((int)k, args, &copy, false)) == 0) {
        *out = model_opts(&copy);
        out->ram_budget = copy.ram_budget;
        snprintf(out->id, sizeof(out->id), "%s", id ? id : "");
        snprintf(out->path, sizeof(out->path), "%s", path);
    }
    json_decref(texts);
    return rc == 0 ? 0 : -EINVAL;
}

/* The models to serve: -m (the default, preloaded), --models-dir, the config's list. Returns the
 * pool or NULL with a message printed. */
static struct pool *pool_setup(const struct options *o, bool several) {
    char err[512];
    struct pool_config pc = {.ram_budget = o->ram_budget, .log = true, .gpu = o->gpu_dev,
                             .load_timeout_s = o->load_timeout > 0 ? o->load_timeout : 300};
    struct pool *p = pool_new(&pc, err, sizeof(err));
    int rc = p ? 0 : -ENOMEM;
    if (p && o->model) {
        struct pool_model_opts m = model_opts(o);
        snprintf(m.id, sizeof(m.id), "%s", o->alias ? o->alias : "");
        snprintf(m.path, sizeof(m.path), "%s", o->model);
        m.stream = o->ram_budget > 0 && !several; /* one model: the budget is its own */
        rc = pool_add(p, &m);
    }
    for (size_t i = 0; rc == 0 && o->models && i < json_array_size(o->models); i++) {
        struct pool_model_opts m;
        rc = model_entry(json_array_get(o->models, i), o, &m);
        if (rc == 0 && (rc = pool_add(p, &m)) == -EEXIST)
            fprintf(stderr, "sniperd: two models are called \"%s\"\n", m.id);
    }
    if (rc == 0 && o->models_dir) {
        struct pool_model_opts m = model_opts(o);
        rc = pool_add_dir(p, o->models_dir, &m, err, sizeof(err));
        if (rc < 0)
            fprintf(stderr, "sniperd: %s\n", err);
        rc = rc < 0 ? rc : 0;
    }
    if (rc == 0 && p && pool_size(p) == 0) {
        fprintf(stderr, "sniperd: no models to serve (an empty --models-dir?)\n");
        rc = -ENOENT;
    }
    if (rc < 0) {
        if (!p)
            fprintf(stderr, "sniperd: %s\n", err);
        pool_free(p);
        return NULL;
    }
    return p;
}

/* After a stop signal: refuse new work (503, /health "draining", so a balancer moves on) and wait
 * until the requests running have sent their replies, at most timeout_s, or a second signal. */
static void drain(struct http_server *srv, struct api *api, const sigset_t *sigs, double timeout_s) {
    api_set_draining(api);
    int running = http_server_active(srv);
    if (running == 0)
        return;
    fprintf(stderr, "sniperd: draining: %d request%s running, new ones refused (up to %.0f s; a "
                    "second signal stops at once)\n", running, running > 1 ? "s" : "", timeout_s);
    const double end = clock_now_s() + timeout_s;
    const struct timespec tick = {0, 50 * 1000 * 1000};
    while ((running = http_server_active(srv)) > 0) {
        if (clock_now_s() >= end) {
            fprintf(stderr, "sniperd: drain timeout: stopping with %d request%s running\n",
                    running, running > 1 ? "s" : "");
            return;
        }
        if (sigtimedwait(sigs, NULL, &tick) > 0) {
            fprintf(stderr, "sniperd: second signal: stopping now\n");
            return;
        }
    }
    fprintf(stderr, "sniperd: drained\n");
}

/* The host's name as a replica id (characters a replica id may not hold become '-'). */
static void default_replica_id(char *out, size_t len) {
    if (gethostname(out, len) != 0 || !out[0])
        snprintf(out, len, "sniperd");
    out[len - 1] = '\0';
    for (char *p = out; *(p += strspn(p, REPLICA_ID_CHARS)); p++)
        *p = '-';
}

/* The default model's load, shown by /health and, on a terminal, as a line redrawn in place. */
static void show_progress(void *ctx, double f) {
    api_set_progress(ctx, f);
    if (isatty(STDERR_FILENO))
        fprintf(stderr, "\rsniperd: loading %3.0f%%", 100.0 * f);
}

/* The daemon: listen at once (so /health can say "loading"), load the default model (-m) or list
 * the models (--models-dir, "models"), serve until SIGINT/SIGTERM. */
static int run_daemon(const struct options *o) {
    if (!is_loopback(o->host) && !(o->api_key && o->api_key[0])) {
        fprintf(stderr, "sniperd: refusing to serve on %s without an API key: anyone who can "
                        "reach this address could use the model; pass --api-key KEY (or set "
                        "SNIPER_API_KEY), or bind 127.0.0.1\n", o->host);
        return 2;
    }
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* every thread started from here inherits it */
    signal(SIGPIPE, SIG_IGN);
    const bool several = o->models_dir || o->models;
    char err[512] = "";
    struct pool *pool = pool_setup(o, several);
    if (!pool)
        return 1;
    /* -m is the pool's first entry, its header read when added: a bad file fails before the
     * daemon says it is listening */
    struct pool_entry_info first;
    pool_entry(pool, 0, &first);
    if (o->model && first.state == POOL_FAILED) {
        fprintf(stderr, "sniperd: %s: %s\n", o->model, first.error);
        pool_free(pool);
        return 1;
    }
    char replica[64];
    if (o->replica_id)
        snprintf(replica, sizeof(replica), "%s", o->replica_id);
    else
        default_replica_id(replica, sizeof(replica));
    const char *const headers[] = {"X-Sniper-Replica", replica, NULL};
    struct api_config acfg = {.api_key = o->api_key, .ram_budget = o->ram_budget,
                              .context_dir = o->context_dir, .s3 = &o->s3,
                              .replica_id = replica, .upload_on_save = o->upload_on_save};
    struct api *api = api_new(&acfg, err, sizeof(err));
    struct http_server_config hcfg = {.host = o->host, .port = o->port,
                                      .max_body = (size_t)o->max_body,
                                      .max_connections = o->max_connections,
                                      .max_per_ip = o->max_per_ip,
                                      .read_timeout_s = o->read_timeout_s, .headers = headers};
    struct http_server *srv = api ? http_server_start(&hcfg, api_handle, api, err, sizeof(err))
                                  : NULL;
    if (!srv) {
        fprintf(stderr, "sniperd: %s\n", err);
        api_free(api);
        pool_free(pool);
        return 1;
    }
    const bool v6 = strchr(o->host, ':') != NULL;
    fprintf(stderr, "sniperd: listening on http://%s%s%s:%d (%s %s)\n", v6 ? "[" : "", o->host,
            v6 ? "]" : "", http_server_port(srv), o->model ? "loading" : "serving",
            o->model ? o->model : o->models_dir ? o->models_dir : "the config's models");
    if (o->model && first.generated)
        fprintf(stderr, "sniperd: %s was generated by sniper-mkmodel: its weights are random, so "
                        "replies are gibberish; serve a real GGUF with -m PATH (make run "
                        "MODEL=PATH)\n", o->model);
    int rc = 1;
    if (o->model && pool_preload(pool, show_progress, api, err, sizeof(err)) < 0) {
        if (isatty(STDERR_FILENO))
            fprintf(stderr, "\r\033[K");
        goto out;
    }
    if (o->model && isatty(STDERR_FILENO))
        fprintf(stderr, "\r\033[K");
    api_set_ready(api, pool, several);
    struct pool_entry_info def;
    pool_entry(pool, pool_default(pool), &def);
    fprintf(stderr, "sniperd: ready: model %s, context %d, %d slot%s, %d model%s served\n",
            def.id, def.n_ctx, o->parallel, o->parallel > 1 ? "s" : "", pool_size(pool),
            pool_size(pool) > 1 ? "s" : "");
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "sniperd: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    if (o->drain_timeout > 0)
        drain(srv, api, &sigs, o->drain_timeout);
    rc = 0;
out:
    if (rc != 0)
        fprintf(stderr, "sniperd: %s\n", err);
    http_server_stop(srv); /* no request is running past this */
    /* the pool first: a job still running (a drain cut short) ends in its scheduler, whose
     * callback releases the request's call through the api */
    pool_free(pool);
    api_free(api);
    return rc;
}

/* --gpu: opens the device it names into o->gpu_dev and prints what it is, or leaves the CPU
 * (none found, or "none"), saying why on stderr. Returns 0, or -EINVAL for a spec that names no
 * usable device (the message printed). */
static int open_gpu(struct options *o) {
    char err[512] = "", desc[1024];
    const char *spec = o->gpu ? o->gpu : getenv("SNIPER_GPU") ? getenv("SNIPER_GPU") : "auto";
    const int i = gpu_choose(spec, err, sizeof(err));
    if (i == -EINVAL) {
        fprintf(stderr, "sniperd: --gpu: %s\n", err);
        return -EINVAL;
    }
    if (i < 0) {
        if (err[0])
            fprintf(stderr, "gpu: none (%s): running on the CPU\n", err);
        return 0;
    }
    if (!(o->gpu_dev = gpu_open(i, o->gpu_budget, err, sizeof(err)))) {
        fprintf(stderr, "gpu: %s: running on the CPU\n", err);
        return 0;
    }
    const struct gpu_info *in = gpu_get_info(o->gpu_dev);
    fprintf(stderr, "gpu: device %d: %s (%s); %s\n", i, in->name, in->driver,
            gpu_describe(o->gpu_dev, desc, sizeof(desc)));
    return 0;
}

int main(int argc, char **argv) {
    static char hub_path[HUB_PATH_MAX];
    struct options o = {.n_predict = 64, .cache = {.io = EXPERT_IO_URING, .io_depth = 32},
                        .host = "127.0.0.1",
                        .port = SNIPER_PORT, .queue = 16, .parallel = 1, .max_body = 8u << 20,
                        .max_connections = HTTP_MAX_CONNECTIONS, .max_per_ip = HTTP_MAX_PER_IP,
                        .read_timeout_s = HTTP_READ_TIMEOUT_S, .drain_timeout = 60,
                        .api_key = getenv("SNIPER_API_KEY")};
    o.sp = sampler_params_default();
    o.ep = engine_params_default();
    json_t *config = NULL;
    int rc = 0;
    for (int i = 1; i + 1 < argc && rc == 0; i++)
        if (!strcmp(argv[i], "-c") || !strcmp(argv[i], "--config"))
            rc = load_config(argv[++i], &o, &config);
    if (rc == 0)
        rc = parse_args(argc, argv, &o, true);
    if (rc != 0) {
        if (rc == 1)
            usage(stdout);
        json_decref(config);
        return rc == 1 ? 0 : 2;
    }
    if (model_resolve(&o.model, hub_path) < 0) {
        json_decref(config);
        return 1;
    }
    bool one_shot = o.prompt || o.prompt_file || o.bench_prompt > 0;
    if (!o.tokenize && open_gpu(&o) < 0) {
        json_decref(config);
        return 2;
    }
    rc = o.tokenize ? run_tokenize(&o) : one_shot ? run_generate(&o) : run_daemon(&o);
    gpu_close(o.gpu_dev);
    json_decref(config);
    return rc;
}
