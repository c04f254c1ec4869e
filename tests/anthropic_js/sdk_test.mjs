// sdk_test.mjs - sniperd's /v1/messages through the official Anthropic JavaScript client (npm
// "@anthropic-ai/sdk"): messages.create whole and through the stream helper (its finalMessage
// assembled from the events), countTokens equal to the prompt tokens a call reads, a tool call
// forced by tool_choice whose input parses, a tool_result turn, thinking blocks, and errors as the
// client's typed errors. Two daemons: a random tiny model (RANDOM_URL) and one scripted
// (tests/openai_js/scripted_model.py) to think "Hm", answer "OK" and call a tool with {}
// (SCRIPTED_URL). Usage: node sdk_test.mjs RANDOM_URL SCRIPTED_URL API_KEY
import Anthropic from "@anthropic-ai/sdk";
import { attempt, check, done } from "./check.mjs";

const [randomURL, scriptedURL, apiKey] = process.argv.slice(2);
const opts = { apiKey, maxRetries: 0, timeout: 60000 };
const rnd = new Anthropic({ baseURL: randomURL, ...opts });
const scr = new Anthropic({ baseURL: scriptedURL, ...opts });
const model = "sniper-local"; // any name: a daemon serving one model answers with its own
const J = JSON.stringify;
const base = { model, max_tokens: 12, temperature: 0, system: "Be brief.",
               messages: [{ role: "user", content: "Hello there" }] };
const tools = [{ name: "get_weather", description: "The weather of a city",
                 input_schema: { type: "object", properties: { city: { type: "string" } } } }];

let plain = null;
await attempt("messages.create", async () => {
  plain = await rnd.messages.create(base);
  check("messages.create", plain.type === "message" && plain.role === "assistant" &&
        plain.content.length === 1 && plain.content[0].type === "text" &&
        plain.content[0].text.length > 0 && ["end_turn", "max_tokens"].includes(plain.stop_reason) &&
        plain.usage.output_tokens > 0 && plain.usage.output_tokens <= 12, J(plain));
});
await attempt("messages.stream finalMessage", async () => {
  const deltas = [];
  const stream = rnd.messages.stream(base);
  stream.on("text", (t) => deltas.push(t));
  const m = await stream.finalMessage();
  check("messages.stream finalMessage equals create (greedy)",
        J(m.content) === J(plain.content) && m.stop_reason === plain.stop_reason &&
        deltas.join("") === plain.content[0].text, `${J(m)} vs ${J(plain)}`);
  check("the streamed usage reads the prompt cache",
        m.usage.cache_read_input_tokens > 0 &&
        m.usage.input_tokens + m.usage.cache_read_input_tokens ===
          plain.usage.input_tokens + plain.usage.cache_read_input_tokens, J(m.usage));
});
await attempt("messages.countTokens", async () => {
  const c = await rnd.messages.countTokens({ model, system: base.system, messages: base.messages });
  check("countTokens equals the prompt tokens of a call",
        c.input_tokens === plain.usage.input_tokens + plain.usage.cache_read_input_tokens,
        `${J(c)} vs ${J(plain.usage)}`);
});

let call = null;
const ask = [{ role: "user", content: "What is the weather in Paris?" }];
await attempt("forced tool_use", async () => {
  call = await scr.messages.create({ model, max_tokens: 64, tools, messages: ask,
                                     tool_choice: { type: "tool", name: "get_weather" } });
  const tu = call.content.filter((b) => b.type === "tool_use");
  check("tool_choice forces a tool_use whose input parses", call.stop_reason === "tool_use" &&
        tu.length === 1 && tu[0].name === "get_weather" && tu[0].id.startsWith("toolu_") &&
        J(tu[0].input) === "{}", J(call));
});
await attempt("forced tool_use streamed", async () => {
  const m = await scr.messages.stream({ model, max_tokens: 64, tools, messages: ask,
                                        tool_choice: { type: "any" } }).finalMessage();
  const tu = m.content.filter((b) => b.type === "tool_use");
  check("tool_choice any, streamed: the stream helper parses the input", tu.length === 1 &&
        tu[0].name === "get_weather" && J(tu[0].input) === "{}" && m.stop_reason === "tool_use",
        J(m));
});
await attempt("tool_result turn", async () => {
  const use = call.content.find((b) => b.type === "tool_use");
  const r = await scr.messages.create({ model, max_tokens: 64, tools, messages: [
    ...ask, { role: "assistant", content: call.content },
    { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "18 C" }] }] });
  check("a tool_result turn is answered", r.stop_reason === "end_turn" &&
        r.content.at(-1).type === "text" && r.content.at(-1).text === "OK", J(r));
});
const thinking = { type: "enabled", budget_tokens: 1024 };
await attempt("thinking", async () => {
  const r = await scr.messages.create({ model, max_tokens: 2048, thinking, messages: ask });
  check("thinking blocks", J(r.content.map((b) => [b.type, b.thinking ?? b.text])) ===
        J([["thinking", "Hm"], ["text", "OK"]]) && r.stop_reason === "end_turn", J(r));
  const events = [];
  const s = scr.messages.stream({ model, max_tokens: 2048, thinking, messages: ask });
  s.on("streamEvent", (e) => events.push(e.type === "content_block_delta" ? e.delta.type : e.type));
  const m = await s.finalMessage();
  check("thinking streamed (thinking_delta, then text_delta)",
        J(m.content) === J(r.content) && events.includes("thinking_delta") &&
        events.indexOf("thinking_delta") < events.indexOf("text_delta"), `${J(m)} ${J(events)}`);
});
await attempt("errors", async () => {
  let err = null;
  try {
    await rnd.messages.create({ ...base, messages: [{ role: "user", content: [{ type: "hologram" }] }] });
  } catch (e) { err = e; }
  check("an unknown block type: BadRequestError, invalid_request_error",
        err instanceof Anthropic.BadRequestError && err.status === 400 &&
        err.error?.type === "error" && err.error?.error?.type === "invalid_request_error", `${err}`);
  err = null;
  try {
    await new Anthropic({ baseURL: randomURL, ...opts, apiKey: "wrong" }).messages.create(base);
  } catch (e) { err = e; }
  check("a wrong key: AuthenticationError", err instanceof Anthropic.AuthenticationError, `${err}`);
});
done();
