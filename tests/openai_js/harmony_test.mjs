// harmony_test.mjs - gpt-oss through the official OpenAI JavaScript client: sniperd serves two
// scripted tiny gpt-oss models (scripted_model.py: their greedy reply is a fixed harmony token
// chain, computed by the engine's real forward pass) and its harmony parser must hand the client
// reasoning_content and content (whole and streamed), and a tool call with finish_reason
// tool_calls. Prints "ok NAME" / "FAIL NAME" and "N passed, N failed, 0 skipped".
// Usage: node harmony_test.mjs REASON_BASE_URL TOOL_BASE_URL API_KEY
import OpenAI from "openai";
import { attempt, check, done } from "./check.mjs";

const [reasonURL, toolURL, apiKey] = process.argv.slice(2);
const reason = new OpenAI({ baseURL: reasonURL, apiKey, maxRetries: 0, timeout: 60000 });
const tool = new OpenAI({ baseURL: toolURL, apiKey, maxRetries: 0, timeout: 60000 });

const model = (await reason.models.list()).data[0]?.id;
const messages = [{ role: "user", content: "Hello" }];
const tools = [{ type: "function", function: { name: "add", description: "adds",
  parameters: { type: "object", properties: {} } } }];

// <|channel|>analysis<|message|>Hm<|end|>OK<|return|>
await attempt("harmony reasoning", async () => {
  const r = await reason.chat.completions.create({ model, messages, max_tokens: 32, temperature: 0,
    reasoning_effort: "low" });
  const m = r.choices[0].message;
  check("harmony reasoning", m.reasoning_content === "Hm" && m.content === "OK"
    && r.choices[0].finish_reason === "stop", JSON.stringify(r.choices[0]));
});
await attempt("harmony reasoning stream", async () => {
  const stream = await reason.chat.completions.create({ model, messages, max_tokens: 32,
    temperature: 0, stream: true });
  let content = "", reasoning = "", finish = null;
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    content += c.delta.content ?? "";
    reasoning += c.delta.reasoning_content ?? "";
    finish = c.finish_reason ?? finish;
  }
  check("harmony reasoning stream", reasoning === "Hm" && content === "OK" && finish === "stop",
    `reasoning ${JSON.stringify(reasoning)}, content ${JSON.stringify(content)}, finish ${finish}`);
});
// <|start|>assistant to=functions.add<|message|>{}<|call|>
await attempt("harmony tool call", async () => {
  const r = await tool.chat.completions.create({ model, messages, tools, max_tokens: 32,
    temperature: 0 });
  const c = r.choices[0], call = c.message.tool_calls?.[0];
  check("harmony tool call", c.finish_reason === "tool_calls" && c.message.tool_calls.length === 1
    && call.type === "function" && call.function.name === "add" && call.function.arguments === "{}"
    && typeof call.id === "string", JSON.stringify(c));
});
await attempt("harmony tool call stream", async () => {
  const stream = await tool.chat.completions.create({ model, messages, tools, max_tokens: 32,
    temperature: 0, stream: true });
  let name = "", args = "", finish = null, content = "";
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    for (const t of c.delta.tool_calls ?? []) {
      name += t.function?.name ?? "";
      args += t.function?.arguments ?? "";
    }
    content += c.delta.content ?? "";
    finish = c.finish_reason ?? finish;
  }
  check("harmony tool call stream", name === "add" && args === "{}" && content === ""
    && finish === "tool_calls", `name ${name}, args ${args}, content ${content}, finish ${finish}`);
});
done();
