// ollama_test.mjs - sniperd's Ollama API through the official Ollama JavaScript client (npm
// "ollama"): version, list, ps, show, chat whole and streamed (NDJSON, the text assembled equal
// to the whole reply's at temperature 0), generate, format json, refusals (pull, embed) as the
// client's ResponseError, and on scripted gpt-oss models thinking and a tool call.
// Usage: node ollama_test.mjs HOST REASON_HOST TOOL_HOST
import { Ollama } from "ollama";
import { attempt, check, done } from "./check.mjs";

const [host, reasonHost, toolHost] = process.argv.slice(2);
const client = new Ollama({ host });
const messages = [{ role: "system", content: "You are terse." }, { role: "user", content: "Hello" }];
const options = { temperature: 0, num_predict: 8 };
let model = "";

await attempt("version", async () => {
  const v = await client.version();
  check("version", typeof v.version === "string" && /^\d+\.\d+\.\d+$/.test(v.version), JSON.stringify(v));
});
await attempt("list", async () => {
  const r = await client.list();
  model = r.models[0]?.name;
  check("list", typeof model === "string" && r.models[0].details.format === "gguf"
    && r.models[0].size > 0, JSON.stringify(r));
});
await attempt("ps", async () => {
  const r = await client.ps();
  check("ps", r.models.length === 1 && r.models[0].name === model, JSON.stringify(r));
});
await attempt("show", async () => {
  const r = await client.show({ model });
  check("show", r.details.family.length > 0 && r.capabilities.includes("completion")
    && r.model_info["general.context_length"] > 0, JSON.stringify(r));
});
let whole = null;
await attempt("chat", async () => {
  whole = await client.chat({ model: `${model}:latest`, messages, options });
  check("chat", whole.done === true && whole.message.role === "assistant"
    && typeof whole.message.content === "string" && whole.eval_count === 8
    && whole.prompt_eval_count > 0 && whole.done_reason === "length", JSON.stringify(whole));
});
await attempt("chat stream", async () => {
  let text = "", n = 0, last = null;
  for await (const part of await client.chat({ model, messages, options, stream: true })) {
    n++;
    text += part.message.content;
    last = part;
  }
  check("chat stream", n > 1 && last.done === true && last.eval_count === 8
    && text === whole?.message.content, `${n} parts, ${JSON.stringify(text)} vs ${JSON.stringify(whole?.message.content)}`);
});
await attempt("generate", async () => {
  const r = await client.generate({ model, prompt: "Hello world", options: { temperature: 0, num_predict: 6 } });
  let text = "";
  for await (const part of await client.generate({ model, prompt: "Hello world", stream: true,
    options: { temperature: 0, num_predict: 6 } })) text += part.response;
  check("generate", r.done === true && typeof r.response === "string" && r.eval_count === 6
    && text === r.response, `${JSON.stringify(r)} / ${JSON.stringify(text)}`);
});
await attempt("format json", async () => {
  // a tiny random model: the JSON grammar may still be open when the tokens run out, so try seeds
  let obj = null;
  for (let seed = 0; seed < 12 && obj === null; seed++) {
    const r = await client.chat({ model, messages: [{ role: "user", content: "json please" }],
      format: "json", options: { temperature: 1, seed, num_predict: 64 } });
    if (r.done_reason === "stop") obj = JSON.parse(r.message.content);
  }
  check("format json", obj !== null && typeof obj === "object" && !Array.isArray(obj), JSON.stringify(obj));
});
for (const [name, fn] of [["error: pull", () => client.pull({ model: "llama3" })],
                          ["error: embed", () => client.embed({ model, input: "x" })],
                          ["error: unknown option", () => client.chat({ model, messages, options: { mirostat: 2 } })]]) {
  try {
    await fn();
    check(name, false, "no error");
  } catch (e) {
    check(name, e.name === "ResponseError" && e.status_code === 400 && e.error.length > 0, `${e?.status_code} ${e}`);
  }
}
// <|channel|>analysis<|message|>Hm<|end|>OK<|return|>
await attempt("think", async () => {
  const r = await new Ollama({ host: reasonHost }).chat({ model, think: true,
    messages: [{ role: "user", content: "Hello" }], options: { temperature: 0, num_predict: 32 } });
  check("think", r.message.thinking === "Hm" && r.message.content === "OK", JSON.stringify(r.message));
});
// <|channel|>commentary to=functions.add<|message|>{}<|call|>
await attempt("tool call", async () => {
  const r = await new Ollama({ host: toolHost }).chat({ model, messages: [{ role: "user", content: "Add" }],
    tools: [{ type: "function", function: { name: "add", description: "adds",
      parameters: { type: "object", properties: {} } } }], options: { temperature: 0, num_predict: 32 } });
  const call = r.message.tool_calls?.[0];
  check("tool call", call?.function.name === "add" && typeof call.function.arguments === "object",
    JSON.stringify(r.message));
});
done();
