/* chat.h - chat messages into a prompt, and the model's output back into content, reasoning and
 * tool calls, for the template families sniperd knows (ChatML as Qwen3 writes it, Qwen3.5's,
 * Llama 3, gpt-oss's harmony and Gemma 4's).
 *
 *     enum chat_family f = chat_family_detect(gguf_get_str(g, "tokenizer.chat_template"));
 *     char *prompt = chat_render(f, msgs, n, &(struct chat_render_opts){.add_generation_prompt =
 *                                true, .enable_thinking = true}, err, sizeof(err));
 *     struct chat_stream *s = chat_stream_new(f, false);
 *     chat_stream_feed(s, piece, len, on_event, ctx);   // for each generated piece
 *     chat_stream_finish(s, on_event, ctx);             // at the end
 *
 * The rendered prompt is the string the model's own Jinja template produces for the same messages
 * (tests compare with jinja2's rendering of the real templates). Pure functions: no I/O. */
#ifndef SNIPER_CHAT_H
#define SNIPER_CHAT_H

#include <stdbool.h>
#include <stddef.h>

enum chat_family {
    CHAT_CHATML,  /* <|im_start|>role\n...<|im_end|>: Qwen3 (tools, <think>), Qwen2.5, generic */
    CHAT_LLAMA3,  /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
    CHAT_QWEN35,  /* Qwen3.5's ChatML: thinking opened by the generation prompt ("<think>\n"),
                   * contents trimmed, tool calls as <function=NAME><parameter=KEY>VALUE</...> */
    CHAT_HARMONY, /* gpt-oss: <|start|>ROLE<|channel|>CHANNEL<|message|>...<|end|>; reasoning on
                   * the analysis channel, tool calls to functions.NAME on commentary */
    CHAT_GEMMA4,  /* Gemma 4: <|turn>ROLE\n...<turn|>\n; reasoning in <|channel>thought\n...
                   * <channel|>, tool calls as <|tool_call>call:NAME{...}<tool_call|> */
    CHAT_GEMMA4_INTERLEAVED, /* Gemma 4's interleaved template: the same turns and calls, tool
                              * results on the calling model turn (llama.cpp's conversion),
                              * reasoning kept between calls after the last user turn */
    CHAT_N_FAMILIES,
};

/* One message as the OpenAI API carries it; strings are UTF-8 and borrowed. */
struct chat_message {
    const char *role;              /* "system", "user", "assistant" or "tool" */
    const char *content;           /* may be NULL (an assistant turn with only tool calls) */
    const char *reasoning_content; /* assistant: its <think> text, or NULL */
    const char *tool_calls_json;   /* assistant: JSON array of {"id","type":"function",
                                    * "function":{"name","arguments"}} (arguments a JSON string),
                                    * or NULL */
    const char *tool_call_id;      /* tool: the call it answers, or NULL */
    const char *name;              /* tool: the function's name, or NULL */
};

struct chat_render_opts {
    bool add_generation_prompt; /* end with the assistant's header, ready for the reply */
    bool enable_thinking;       /* false: Qwen3's empty <think></think> block after the header */
    const char *tools_json;     /* JSON array of OpenAI tool definitions, or NULL */
    bool as_prefix;             /* the messages as the start of their own continuation (a saved
                                 * context): rendered as they are when a user turn follows them,
                                 * cut where that turn begins (templates may render the last
                                 * assistant turn differently when it is the last message); no
                                 * generation prompt */
    const char *reasoning_effort; /* CHAT_HARMONY: "low", "medium" or "high"; NULL: medium */
    const char *date;           /* CHAT_HARMONY: the system block's date, YYYY-MM-DD; NULL: today
                                 * (local time) */
};

/* The family of a GGUF's tokenizer.chat_template (NULL or unknown: CHAT_CHATML). */
enum chat_family chat_family_detect(const char *jinja_template);

const char *chat_family_name(enum chat_family f);

/* The text that opens every message of family f ("<|im_start|>", "<|start_header_id|>",
 * "<|start|>"): a static string. */
const char *chat_family_message_start(enum chat_family f);

/* The family chat_family_name calls name, or -1. */
int chat_family_from_name(const char *name);

/* Renders msgs[0..n) into a prompt (malloc'd, NUL-terminated), or NULL with a message in err
 * (unknown role, a tool message without a preceding tool call, malformed tools_json ...). A NULL
 * content renders as "". CHAT_LLAMA3 starts with <|begin_of_text|> (tokenize without adding a
 * BOS) and refuses tools and assistant tool calls; its tool messages use the "ipython" role. */
char *chat_render(enum chat_family f, const struct chat_message *msgs, size_t n,
                  const struct chat_render_opts *opts, char *err, size_t err_len);

/* What the model's output turns into, piece by piece. */
enum chat_event_kind {
    CHAT_EVENT_CONTENT,   /* text: part of the visible reply */
    CHAT_EVENT_REASONING, /* text: part of the <think> block (without the tags) */
    CHAT_EVENT_TOOL_CALL, /* a complete tool call: name and arguments (a JSON text) */
};

struct chat_event {
    enum chat_event_kind kind;
    const char *text;      /* CONTENT, REASONING: the new text (len bytes, not NUL-terminated) */
    size_t len;
    const char *name;      /* TOOL_CALL: function name (NUL-terminated) */
    const char *arguments; /* TOOL_CALL: arguments as a JSON text (NUL-terminated) */
    int index;             /* TOOL_CALL: 0, 1, ... in order of appearance */
};

typedef void (*chat_event_fn)(void *ctx, const struct chat_event *ev);

struct chat_stream;

/* A splitter of generated text into events for family f. The model's reply may start inside a
 * <think> block (templates that end the prompt with "<think>\n", as some Qwen3 variants do), so
 * `in_think` says where it starts; Qwen3's template in the fixtures does not open it (the model
 * writes <think> itself, or the prompt holds an empty block when thinking is off): pass false.
 * Returns NULL on no memory. */
struct chat_stream *chat_stream_new(enum chat_family f, bool in_think);
void chat_stream_free(struct chat_stream *s);

/* Feeds len bytes of generated text; calls fn for every event that is certain (text that might be
 * the start of a tag is held back until the next feed or finish). ChatML: whitespace at the start
 * of the reply and after a tag, newlines before </think> and whitespace before <tool_call> are
 * dropped; a tool call's arguments come back as compact JSON. CHAT_LLAMA3: all content, as is.
 * Returns 0 or -ENOMEM. */
int chat_stream_feed(struct chat_stream *s, const char *text, size_t len, chat_event_fn fn,
                     void *ctx);

/* Flushes what was held back (an unfinished tag is content; an unfinished tool call is content
 * too). Returns the number of tool calls seen. */
int chat_stream_finish(struct chat_stream *s, chat_event_fn fn, void *ctx);

#endif
