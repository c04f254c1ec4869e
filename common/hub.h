/* hub.h - models by name from the Hugging Face hub (or a mirror of it): "user/repo[:QUANT]" becomes
 * the GGUF file(s) of that quantization in a local models directory, downloaded once.
 *
 *     struct hub_opts o;
 *     hub_opts_from_env(&o);   // HF_ENDPOINT, HF_TOKEN, SNIPER_MODELS_DIR, HF_HUB_OFFLINE
 *     char path[HUB_PATH_MAX], err[512];
 *     if (hub_pull(&o, "unsloth/Qwen3-30B-A3B-GGUF:Q4_K_M", path, sizeof(path), err,
 *                  sizeof(err)) < 0)
 *         fprintf(stderr, "%s\n", err);
 *     // path: the model's file (a split model's first shard), for sniperd -m
 *
 * The repo's file list comes from the hub's model API (GET /api/models/USER/REPO?blobs=true: each
 * file's size and, for LFS files, its sha256); the files whose quantization tag (the last "-" or
 * "." separated part of the name, before any -0000K-of-0000N) equals QUANT, case-insensitively,
 * are fetched from /USER/REPO/resolve/main/FILE (redirects followed): every shard of a split model.
 * Cache layout: DIR/USER/REPO/FILE (FILE's base name), written as FILE.part and renamed once
 * complete and verified, so a file under its own name is always whole. A download that stops
 * (network, Ctrl-C, disk full) keeps FILE.part and the next pull resumes it with an HTTP range; a
 * sha256 mismatch removes it and downloads once more. */
#ifndef SNIPER_HUB_H
#define SNIPER_HUB_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define HUB_DEFAULT_ENDPOINT "https://huggingface.co"
#define HUB_DEFAULT_QUANT "Q4_K_M" /* when the name has no :QUANT and the repo has several */
#define HUB_PATH_MAX 4096

struct hub_opts {
    char endpoint[512];           /* the hub's base URL, no trailing slash */
    char token[512];              /* sent as Authorization: Bearer TOKEN; "" for none */
    char models_dir[1024];        /* the cache's root */
    bool offline;                 /* the cache only: nothing is asked of the network */
    FILE *progress;               /* where progress goes (stderr); NULL: silent */
    bool tty;                     /* progress is a terminal: one bar redrawn in place; else a
                                   * plain line every 10% */
    volatile sig_atomic_t *cancel; /* non-zero stops a download (its part is kept); may be NULL */
};

/* Fills o from the environment: HF_ENDPOINT (else HUB_DEFAULT_ENDPOINT), HF_TOKEN, the models
 * directory SNIPER_MODELS_DIR (else $XDG_CACHE_HOME/sniper/models, else
 * ~/.cache/sniper/models), HF_HUB_OFFLINE=1 for offline; progress to stderr, tty when it is one. */
void hub_opts_from_env(struct hub_opts *o);

/* True for names meant for the hub: "hf:user/repo[:QUANT]". */
bool hub_ref_is(const char *s);

/* Resolves ref ("user/repo[:QUANT]", optionally "hf:"-prefixed) to local files, downloading what
 * the cache lacks (offline: only looking). Returns 0 with the path of the model's file (the first
 * shard of a split model) in path, or a negative errno with one line in err: -EINVAL (a malformed
 * name), -ENOENT (no such repo, no file for QUANT: err lists the quantizations the repo has;
 * offline and not in the cache), -EACCES (401/403: gated or private, set HF_TOKEN), -EHOSTUNREACH
 * (the hub cannot be reached), -ENOSPC (disk full: err says how many bytes more are needed; the
 * partial file is kept), -EBADMSG (a file's sha256 did not match twice: removed), -ECANCELED,
 * -ENOMEM, -EIO (anything else: err says what). */
int hub_pull(const struct hub_opts *o, const char *ref, char *path, size_t path_len, char *err,
             size_t err_len);

#endif
