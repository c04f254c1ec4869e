#!/usr/bin/env python3
"""gen_expected.py - renders the chat-template test conversations with jinja2 and writes
tests/chat/expected.json, the golden strings tests/test_chat.c compares chat_render with.

ChatML cases use Qwen3's real template, read from the fixture GGUF (tokenizer.chat_template);
Llama 3 cases use LLAMA3_TEMPLATE below, written from Meta's published prompt format; Qwen3.5
cases use Qwen3.5's real template (the chat_template of Qwen3.5 GGUFs), which no fixture carries:
it is kept in expected.json ("qwen35_template") and read from there, or at first from the file
QWEN35_TEMPLATE names. Its tool calls take their arguments as objects (the OpenAI API's JSON text
parsed), as inference engines hand them to it. Harmony cases use the chat template of the gpt-oss
GGUFs (llama.cpp ships it as models/templates/openai-gpt-oss-120b.jinja), kept the same way
("harmony_template", at first from the file GPTOSS_TEMPLATE names), with the messages adjusted as
llama.cpp hands them to it: reasoning_content becomes "thinking" (and an assistant message with
tool calls then loses its content), arguments are objects; strftime_now gives the case's date.
Gemma 4 cases use google-gemma-4-31B-it's template (llama.cpp ships it as
models/templates/google-gemma-4-31B-it.jinja), kept the same way ("gemma4_template", at first from
the file GEMMA4_TEMPLATE names), arguments as objects, bos_token empty (sniperd adds the BOS).
Gemma 4 interleaved cases use google-gemma-4-31B-it-interleaved's template (llama.cpp ships it as
models/templates/google-gemma-4-31B-it-interleaved.jinja), kept the same way
("gemma4_interleaved_template", at first from the file GEMMA4_INTERLEAVED_TEMPLATE names), with the
messages adjusted as llama.cpp hands them to it (gemma4_tool_responses below).
tojson is defined as Hugging Face's apply_chat_template defines it (json.dumps with
ensure_ascii=False, keys in their order), which is also what llama.cpp's template engine
writes; plain jinja2's tojson sorts keys and HTML-escapes, which no inference engine does.

    tests/chat/gen_expected.py            # rewrite tests/chat/expected.json
    tests/chat/gen_expected.py --check    # render again and compare with the committed file
"""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXPECTED = os.path.join(HERE, "expected.json")
FIXTURE = "models/tiny-qwen3moe-q8_0.gguf"

LLAMA3_TEMPLATE = (
    "{{- '<|begin_of_text|>' }}"
    "{%- for m in messages %}"
    "{{- '<|start_header_id|>' + ('ipython' if m.role == 'tool' else m.role)"
    " + '<|end_header_id|>\\n\\n' + (m.content or '') | trim + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{%- endif %}")


def fixtures_dir():
    return os.environ.get("SNIPER_FIXTURES") or os.path.join(ROOT, "..", "shared", "fixtures")


def gguf_string(path, key):
    """The string value of one metadata key of a GGUF file (None when absent)."""
    scalar = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(path + ": not a GGUF file")
        _, _, n_kv = struct.unpack("<IQQ", f.read(20))

        def read_str():
            (n,) = struct.unpack("<Q", f.read(8))
            return f.read(n)

        def skip(t):
            if t == 8:
                read_str()
            elif t == 9:
                at, n = struct.unpack("<IQ", f.read(12))
                if at in scalar:
                    f.seek(scalar[at] * n, 1)
                else:
                    for _ in range(n):
                        skip(at)
            else:
                f.seek(scalar[t], 1)

        for _ in range(n_kv):
            k = read_str().decode()
            (t,) = struct.unpack("<I", f.read(4))
            if k == key and t == 8:
                return read_str().decode()
            skip(t)
    return None


def tojson(x, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def raise_exception(msg):
    raise ValueError(msg)


def harmony_message(m):
    """A message as llama.cpp's gpt-oss handler passes it to the template."""
    if isinstance(m.get("reasoning_content"), str):
        m["thinking"] = m.pop("reasoning_content")
        if m.get("tool_calls"):
            m.pop("content", None)
    return m


def gemma4_tool_responses(msgs):
    """The messages as llama.cpp's common/chat.cpp hands them to a Gemma 4 template that reads tool
    results from the calling message (convert_tool_responses_gemma4): an assistant's tool calls, the
    tool messages after them (each content parsed as JSON where it parses, named by the call at the
    same position, else by its tool_call_id) and the content of a plain reply after those become one
    assistant message; the calling message's own content is not kept."""
    out, i = [], 0
    while i < len(msgs):
        m = msgs[i]
        if m["role"] != "assistant" or not m.get("tool_calls"):
            out.append(m)
            i += 1
            continue
        calls, results = list(m["tool_calls"]), []
        g = {"role": "assistant", "tool_calls": calls}
        if isinstance(m.get("reasoning_content"), str):
            g["reasoning_content"] = m["reasoning_content"]
        i += 1
        while i < len(msgs) and msgs[i]["role"] == "tool":
            body = msgs[i].get("content")
            try:
                body = json.loads(body)
            except ValueError:
                pass
            k = len(results)
            name = calls[k]["function"].get("name", "") if k < len(calls) else ""
            results.append({"name": name or msgs[i].get("tool_call_id", ""), "response": body})
            i += 1
        if (i < len(msgs) and msgs[i]["role"] == "assistant" and not msgs[i].get("tool_calls")
                and msgs[i].get("content")):
            g["content"] = msgs[i]["content"]
            i += 1
        if results:
            g["tool_responses"] = results
        out.append(g)
    return out


def render(template, case):
    import jinja2.sandbox
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: case.get("date", "")
    msgs = []
    for m in case["messages"]:
        m = dict(m)
        if m.get("content") is None:
            m["content"] = ""  # sniperd renders a null content as "" (the template needs a string)
        if case["family"] in ("qwen35", "harmony", "gemma4", "gemma4-interleaved") and \
                m.get("tool_calls"):
            m["tool_calls"] = [dict(c, function=dict(c["function"], arguments=json.loads(
                c["function"]["arguments"]))) for c in m["tool_calls"]]
        if case["family"] == "harmony":
            m = harmony_message(m)
        msgs.append(m)
    if case["family"] == "gemma4-interleaved":
        msgs = gemma4_tool_responses(msgs)
    kwargs = {"reasoning_effort": case["reasoning_effort"]} if "reasoning_effort" in case else {}
    return env.from_string(template).render(
        messages=msgs, tools=case.get("tools"), add_generation_prompt=case["add_generation_prompt"],
        enable_thinking=case["enable_thinking"], bos_token="", eos_token="", **kwargs)


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. Zürich"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the web <fast> & 'safe'",
    "parameters": {"type": "object", "properties": {
        "q": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 50,
                                          "default": 10},
        "score": {"type": "number", "minimum": 0.5, "maximum": 1e-05, "default": 1e16,
                  "x": [0.1, -2.5, 123456.789, 1.5e300, 0.0001, 1.0, True, None]}},
        "required": ["q"]}}}


def call(cid, name, args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def cases():
    u = lambda c: {"role": "user", "content": c}
    a = lambda c, **kw: dict({"role": "assistant", "content": c}, **kw)
    s = lambda c: {"role": "system", "content": c}
    t = lambda c, cid: {"role": "tool", "content": c, "tool_call_id": cid}
    wcall = call("call_1", "get_weather", '{"city": "Paris"}')
    out = [
        ("user_only", [u("Hello")], None, True, True),
        ("system_user", [s("You are terse."), u("Hi there")], None, True, True),
        ("no_generation_prompt", [s("Sys"), u("Hi")], None, False, True),
        ("thinking_off", [s("Sys"), u("What is 2+2?")], None, True, False),
        ("multi_turn", [s("Sys"), u("Hi"), a("Hello! How can I help?"), u("Tell a joke")],
         None, True, True),
        ("multi_turn_thinking_off", [u("Hi"), a("Hello!"), u("Bye")], None, True, False),
        ("reasoning_field_last", [u("Hi"), a("Hello!", reasoning_content="\nThe user greets.\n")],
         None, False, True),
        ("reasoning_history_dropped",
         [u("Hi"), a("Hello!", reasoning_content="greeting"), u("2+2?")], None, True, True),
        ("reasoning_in_content", [u("Q"), a("<think>\nhmm\n</think>\n\nAnswer")], None, False, True),
        ("reasoning_in_content_history",
         [u("Q"), a("<think>\nhmm\n</think>\n\nAnswer"), u("Again")], None, True, True),
        ("tools_list", [s("You help."), u("Weather in Paris?")], [WEATHER, SEARCH], True, True),
        ("tools_no_system", [u("Weather in Paris?")], [WEATHER], True, True),
        ("tool_call_and_result",
         [s("You help."), u("Weather in Paris?"), a(None, tool_calls=[wcall]),
          t('{"temp": 21, "sky": "clear"}', "call_1")], [WEATHER], True, True),
        ("tool_call_with_content_and_reasoning",
         [u("Weather in Paris?"),
          a("Let me check.", reasoning_content="Need the tool.", tool_calls=[wcall]),
          t("21C", "call_1"), a("It is 21C in Paris.")], [WEATHER], False, True),
        ("multiple_tool_calls",
         [u("Paris and Rome?"),
          a("", tool_calls=[call("c1", "get_weather", '{"city": "Paris"}'),
                            call("c2", "get_weather", '{"city": "Rome", "unit": "celsius"}')]),
          t("21C", "c1"), t("25C", "c2")], [WEATHER], True, True),
        ("tool_result_then_user",
         [u("Paris?"), a(None, tool_calls=[wcall]), t("21C", "call_1"), a("21C."),
          u("Thanks, and <tool_response>x</tool_response>?")], [WEATHER], True, False),
        ("user_tool_response_text",
         [u("Q"), a("A1", reasoning_content="r1"), u("<tool_response>\nx\n</tool_response>"),
          a("A2", reasoning_content="r2")], None, False, True),
        ("system_in_middle", [u("Hi"), s("Be brief."), u("Again")], None, True, True),
        ("unicode", [s("Répondez en français 🇫🇷"), u("日本語で？ tabs\tand\nnewlines\n\n")],
         None, True, True),
        ("empty_strings", [s(""), u(""), a(""), u("x")], None, True, True),
    ]
    qwen35 = [
        ("q35_user_only", [u("Hello")], None, True, True),
        ("q35_thinking_off", [s(" You are terse. "), u("  What is 2+2?\n")], None, True, False),
        ("q35_no_generation_prompt", [s("Sys"), u("Hi")], None, False, True),
        ("q35_multi_turn", [s("Sys"), u("Hi"), a("Hello! How can I help?"), u("Tell a joke")],
         None, True, True),
        ("q35_reasoning_last", [u("Hi"), a("Hello!", reasoning_content="\nThe user greets.\n")],
         None, False, True),
        ("q35_reasoning_history_dropped",
         [u("Hi"), a("Hello!", reasoning_content="greeting"), u("2+2?")], None, True, True),
        ("q35_reasoning_in_content", [u("Q"), a("<think>\nhmm\n</think>\n\n Answer ")], None, False,
         True),
        ("q35_empty_reasoning_after_query", [u("Q"), a("Plain answer")], None, False, True),
        ("q35_tools_list", [s("You help."), u("Weather in Paris?")], [WEATHER, SEARCH], True, True),
        ("q35_tools_no_system", [u("Weather in Paris?")], [WEATHER], True, False),
        ("q35_tool_call_and_result",
         [s("You help."), u("Weather in Paris?"), a(None, tool_calls=[wcall]),
          t('{"temp": 21, "sky": "clear"}', "call_1")], [WEATHER], True, True),
        ("q35_tool_call_with_content",
         [u("Weather in Paris?"),
          a("Let me check.", reasoning_content="Need the tool.", tool_calls=[wcall]),
          t("21C", "call_1"), a("It is 21C in Paris.")], [WEATHER], False, True),
        ("q35_multiple_tool_calls_typed_args",
         [u("Paris and Rome?"),
          a("", tool_calls=[call("c1", "get_weather", '{"city": "Paris", "days": 3}'),
                            call("c2", "search", '{"q": "Rome", "limit": 5, "score": 0.75, '
                                 '"exact": true, "tags": ["a", "b"], "opt": {"x": null}}')]),
          t("21C", "c1"), t("25C", "c2")], [WEATHER, SEARCH], True, True),
        ("q35_unicode", [s("Répondez en français 🇫🇷"), u("日本語で？ tabs\tand\nnewlines\n\n")],
         None, True, True),
    ]
    types = {"type": "function", "function": {
        "name": "configure", "description": "Every schema shape the template renders",
        "parameters": {"type": "object", "properties": {
            "name": {"type": "string", "description": "A name"},
            "count": {"type": "integer", "default": 3},
            "mode": {"type": "string", "enum": ["fast", "safe"], "default": "safe"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "ids": {"type": "array", "items": {"type": "integer"}, "nullable": True},
            "points": {"type": "array", "items": {"type": "object", "properties": {
                "x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x"]}},
            "opts": {"type": "object", "properties": {"deep": {"type": "boolean"},
                                                      "level": {"type": "integer"}},
                     "required": ["deep"]},
            "maybe": {"type": ["string", "null"]},
            "one": {"type": ["number"]},
            "either": {"oneOf": [{"type": "string", "description": "text"},
                                 {"type": "number", "default": 1}]},
            "note": {"type": "string", "nullable": True},
            "list": {"type": "array"},
            "anything": {},
            "ratio": {"type": "number", "default": 0.5},
            "strict": {"type": "boolean", "default": False},
            "empty": {"type": "object"},
            "nulldef": {"type": "string", "default": None},
            "levels": {"type": "integer", "enum": [1, 2, 3]},
        }, "required": ["name"]}}}
    noargs = {"type": "function", "function": {"name": "now", "description": "The time",
                                                "parameters": {"type": "object", "properties": {}}}}
    h = lambda name, msgs, tools=None, agp=True, effort=None: (name, msgs, tools, agp, effort)
    harmony = [
        h("h_user_only", [u("Hello")]),
        h("h_system_user", [s("You are terse."), u("Hi there")], effort="low"),
        h("h_effort_high", [u("Prove it.")], effort="high"),
        h("h_no_generation_prompt", [s("Sys"), u("Hi"), a("Yo")], agp=False),
        h("h_reasoning_last", [u("Hi"), a("Hello!", reasoning_content="The user greets.")],
          agp=False),
        h("h_reasoning_history_dropped",
          [u("Hi"), a("Hello!", reasoning_content="greeting"), u("2+2?")]),
        h("h_tools_list", [s("You help."), u("Weather in Paris?")], [WEATHER, SEARCH],
          effort="medium"),
        h("h_tools_no_system", [u("Weather in Paris?")], [WEATHER]),
        h("h_tool_schemas", [u("Set it up.")], [types, noargs]),
        h("h_tool_call_and_result",
          [s("You help."), u("Weather in Paris?"), a(None, tool_calls=[wcall]),
           t('{"temp": 21, "sky": "clear"}', "call_1")], [WEATHER]),
        h("h_tool_call_reasoning_then_final",
          [u("Weather in Paris?"),
           a("Let me check.", reasoning_content="Need the tool.", tool_calls=[wcall]),
           t("21C", "call_1"), a("It is 21C in Paris.")], [WEATHER], agp=False),
        h("h_tool_call_reasoning_pending",
          [u("Weather in Paris?"), a(None, reasoning_content="Need the tool.", tool_calls=[wcall]),
           t("21C", "call_1")], [WEATHER], effort="high"),
        h("h_tool_call_content_as_analysis",
          [u("Weather in Paris?"), a("Checking the weather.", tool_calls=[wcall]),
           t("21C", "call_1")], [WEATHER]),
        h("h_multiple_tool_calls",
          [u("Paris and Rome?"),
           a("", tool_calls=[call("c1", "get_weather", '{"city": "Paris"}'),
                             call("c2", "get_weather", '{"city": "Rome", "unit": "celsius"}')]),
           t("21C", "c1"), t("25C", "c2")], [WEATHER]),
        h("h_tool_result_then_user",
          [u("Paris?"), a(None, tool_calls=[wcall]), t("21C", "call_1"), a("21C."),
           u("Thanks, and \"Zürich\"?")], [WEATHER]),
        h("h_typed_arguments",
          [u("Search"), a(None, tool_calls=[call("c1", "search", '{"q": "Zürich \\"quoted\\"", '
                                                  '"limit": 5, "score": 0.75, "exact": true, '
                                                  '"tags": ["a"], "opt": {"x": null}}')]),
           t("nothing found\nat all", "c1")], [SEARCH]),
        h("h_system_in_middle", [u("Hi"), s("Be brief."), u("Again")]),
        h("h_unicode", [s("Répondez en français 🇫🇷"), u("日本語で？ tabs\tand\nnewlines\n\n")]),
        h("h_empty_strings", [s(""), u(""), a(""), u("x")]),
    ]
    llama = [
        ("llama3_user_only", [u("Hello")], None, True, True),
        ("llama3_system_multi", [s(" You are terse.\n"), u("Hi"), a("Hello!  \n"), u("Bye")],
         None, True, True),
        ("llama3_no_generation_prompt", [s("Sys"), u("Hi"), a("Yo")], None, False, True),
        ("llama3_tool_result", [u("Q"), a("A"), u("x"), a(None), t("42", "c")], None, True, True),
        ("llama3_unicode", [u("日本語 🇫🇷\t")], None, True, True),
    ]
    g = lambda name, msgs, tools=None, agp=True, think=True: (name, msgs, tools, agp, think)
    gemma4 = [
        g("g4_user_only", [u("Hello")]),
        g("g4_thinking_off", [u("  What is 2+2?\n")], think=False),
        g("g4_system_user", [s(" You are terse. "), u("Hi there")], think=False),
        g("g4_system_thinking", [s("You are terse."), u("Hi there")]),
        g("g4_no_generation_prompt", [s("Sys"), u("Hi"), a("Yo")], agp=False, think=False),
        g("g4_multi_turn", [s("Sys"), u("Hi"), a("Hello! How can I help?"), u("Tell a joke")]),
        g("g4_reasoning_history_dropped",
          [u("Hi"), a("Hello!", reasoning_content="greeting"), u("2+2?")], think=False),
        g("g4_thought_in_content",
          [u("Q"), a("<|channel>thought\nhmm<channel|> Answer "), u("Again")], think=False),
        g("g4_tools_list", [s("You help."), u("Weather in Paris?")], [WEATHER, SEARCH]),
        g("g4_tools_no_system", [u("Weather in Paris?")], [WEATHER], think=False),
        g("g4_tool_schemas", [u("Set it up.")], [types, noargs], think=False),
        g("g4_tool_call_and_result",
          [s("You help."), u("Weather in Paris?"), a(None, tool_calls=[wcall]),
           t('{"temp": 21, "sky": "clear"}', "call_1")], [WEATHER]),
        g("g4_tool_call_reasoning_then_final",
          [u("Weather in Paris?"),
           a("", reasoning_content="Need the tool.", tool_calls=[wcall]),
           t("21C", "call_1"), a("It is 21C in Paris.")], [WEATHER], agp=False),
        g("g4_tool_call_with_content",
          [u("Weather in Paris?"), a("Let me check.", tool_calls=[wcall]), t("21C", "call_1")],
          [WEATHER], think=False),
        g("g4_tool_call_pending", [u("Weather in Paris?"), a(None, tool_calls=[wcall])],
          [WEATHER]),
        g("g4_multiple_tool_calls",
          [u("Paris and Rome?"),
           a("", tool_calls=[call("c1", "get_weather", '{"city": "Paris"}'),
                             call("c2", "get_weather", '{"city": "Rome", "unit": "celsius"}')]),
           t("21C", "c1"), t("25C", "c2")], [WEATHER], think=False),
        g("g4_tool_result_then_user",
          [u("Paris?"), a(None, tool_calls=[wcall]), t("21C", "call_1"), a("21C."),
           u("Thanks, and \"Zürich\"?")], [WEATHER]),
        g("g4_typed_arguments",
          [u("Search"), a(None, tool_calls=[call("c1", "search", '{"q": "Zürich \\"quoted\\"", '
                                                  '"limit": 5, "score": 0.75, "exact": true, '
                                                  '"tags": ["a"], "opt": {"x": null, "B": [1.5]}}')]),
           t("nothing found\nat all", "c1")], [SEARCH], think=False),
        g("g4_system_in_middle", [u("Hi"), s("Be brief."), u("Again")], think=False),
        g("g4_unicode", [s("Répondez en français 🇫🇷"), u("日本語で？ tabs\tand\nnewlines\n\n")]),
        g("g4_empty_strings", [s(""), u(""), a(""), u("x")], think=False),
    ]
    # the interleaved template: every gemma4 case, and what only its message conversion does
    r1, r2 = call("c1", "get_weather", '{"city": "Paris"}'), call("c2", "search", '{"q": "Rome"}')
    gemma4i = [("g4i" + c[0][2:],) + c[1:] for c in gemma4] + [
        g("g4i_result_values",
          [u("Paris?"), a(None, tool_calls=[r1, r2]),
           t('{"temp": 21, "Sky": "clear", "n": null, "l": [1, 2.5, "x"], "o": {"b": false}}',
             "c1"), t(" 42 ", "c2"), t('"quoted"', "c3"), t("[true, null, -0.5]", "c4"),
           t("not json {", "c5"), t("", "c6")], [WEATHER, SEARCH]),
        g("g4i_rounds",
          [u("Paris, then Rome?"),
           a("", reasoning_content="Paris first.", tool_calls=[wcall]), t("21C", "call_1"),
           a("Now Rome.", reasoning_content="Then Rome.", tool_calls=[
               call("c2", "get_weather", '{"city": "Rome"}')]),
           t("25C", "c2"), a("Paris 21C, Rome 25C.")], [WEATHER], agp=False),
        g("g4i_rounds_pending",
          [u("Paris, then Rome?"),
           a("", reasoning_content="Paris first.", tool_calls=[wcall]), t("21C", "call_1"),
           a(None, reasoning_content="Then Rome.", tool_calls=[
               call("c2", "get_weather", '{"city": "Rome"}')]), t("25C", "c2")],
          [WEATHER], think=False),
        g("g4i_reasoning_before_last_user",
          [u("Paris?"), a(None, reasoning_content="Call it.", tool_calls=[wcall]),
           t("21C", "call_1"), a("21C."), u("More?")], [WEATHER]),
        g("g4i_call_pending_thinking_off", [u("Paris?"), a(None, tool_calls=[wcall])], [WEATHER],
          think=False),
        g("g4i_empty_calls_then_tool", [u("Q"), a("A", tool_calls=[]), t("r", "x")], None,
          think=False),
    ]
    res = []
    for fam, lst in (("chatml", out), ("qwen35", qwen35), ("llama3", llama), ("gemma4", gemma4),
                     ("gemma4-interleaved", gemma4i)):
        for name, msgs, tools, agp, think in lst:
            res.append({"name": name, "family": fam, "messages": msgs, "tools": tools,
                        "add_generation_prompt": agp, "enable_thinking": think})
    for name, msgs, tools, agp, effort in harmony:
        c = {"name": name, "family": "harmony", "messages": msgs, "tools": tools,
             "add_generation_prompt": agp, "enable_thinking": True, "date": "2025-08-05"}
        if effort:
            c["reasoning_effort"] = effort
        res.append(c)
    return res


def kept_template(env, key):
    """A template from the file $env names, else the copy kept in expected.json under key."""
    path = os.environ.get(env)
    if path:
        with open(path, encoding="utf-8") as f:
            return f.read()
    with open(EXPECTED, encoding="utf-8") as f:
        return json.load(f)[key]


def build():
    path = os.path.join(fixtures_dir(), FIXTURE)
    qwen3 = gguf_string(path, "tokenizer.chat_template")
    qwen35 = kept_template("QWEN35_TEMPLATE", "qwen35_template")
    harmony = kept_template("GPTOSS_TEMPLATE", "harmony_template")
    gemma4 = kept_template("GEMMA4_TEMPLATE", "gemma4_template")
    gemma4i = kept_template("GEMMA4_INTERLEAVED_TEMPLATE", "gemma4_interleaved_template")
    doc = {"qwen3_template": qwen3, "qwen35_template": qwen35, "llama3_template": LLAMA3_TEMPLATE,
           "harmony_template": harmony, "gemma4_template": gemma4,
           "gemma4_interleaved_template": gemma4i, "cases": []}
    templates = {"chatml": qwen3, "qwen35": qwen35, "llama3": LLAMA3_TEMPLATE, "harmony": harmony,
                 "gemma4": gemma4, "gemma4-interleaved": gemma4i}
    for c in cases():
        c["expected"] = render(templates[c["family"]], c)
        doc["cases"].append(c)
    return json.dumps(doc, ensure_ascii=False, indent=1) + "\n"


def main():
    text = build()
    if "--check" in sys.argv[1:]:
        with open(EXPECTED, encoding="utf-8") as f:
            old = f.read()
        n = len(json.loads(text)["cases"])
        if old != text:
            print("gen_expected: tests/chat/expected.json differs from jinja2's rendering; "
                  "run tests/chat/gen_expected.py")
            print("0 passed, 1 failed, 0 skipped")
            return 1
        print("%d passed, 0 failed, 0 skipped" % n)
        return 0
    with open(EXPECTED, "w", encoding="utf-8") as f:
        f.write(text)
    print("gen_expected: wrote %s" % EXPECTED)
    return 0


if __name__ == "__main__":
    sys.exit(main())
