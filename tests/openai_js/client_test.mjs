// client_test.mjs - sniperd through the official OpenAI JavaScript client (npm "openai"):
// models, chat completions whole and streamed (with usage), completions, logprobs, a tool list, and
// errors surfacing as the client's APIError with the right status. Prints "ok NAME" / "FAIL NAME"
// and "N passed, N failed, 0 skipped". Usage: node client_test.mjs BASE_URL API_KEY
import OpenAI from "openai";
import { attempt, check, done } from "./check.mjs";

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });

const messages = [{ role: "system", content: "You are terse." }, { role: "user", content: "Hello" }];
let model = "";
await attempt("models.list", async () => {
  const page = await client.models.list();
  model = page.data[0]?.id;
  check("models.list", typeof model === "string" && page.data[0].object === "model", JSON.stringify(page.data));
});
await attempt("chat.completions.create", async () => {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0 });
  check("chat.completions.create", r.object === "chat.completion" && r.choices[0].message.role === "assistant"
    && r.usage.total_tokens === r.usage.prompt_tokens + r.usage.completion_tokens, JSON.stringify(r));
});
await attempt("chat stream", async () => {
  const stream = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0,
    stream: true, stream_options: { include_usage: true } });
  let text = "", finish = null, usage = null, n = 0;
  for await (const chunk of stream) {
    n++;
    if (chunk.choices.length) {
      text += chunk.choices[0].delta.content ?? "";
      finish = chunk.choices[0].finish_reason ?? finish;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  check("chat stream", n > 1 && finish !== null && usage?.completion_tokens >= 1, `${n} chunks, finish ${finish}`);
});
await attempt("completions.create", async () => {
  const r = await client.completions.create({ model, prompt: "Hello world", max_tokens: 6, temperature: 0 });
  check("completions.create", r.object === "text_completion" && typeof r.choices[0].text === "string", JSON.stringify(r));
});
await attempt("logprobs", async () => {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 3, temperature: 0,
    logprobs: true, top_logprobs: 2 });
  const lp = r.choices[0].logprobs?.content ?? [];
  check("logprobs", lp.length === r.usage.completion_tokens && lp.every(t => t.top_logprobs.length === 2), JSON.stringify(r.choices[0]));
});
await attempt("tools", async () => {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0,
    tools: [{ type: "function", function: { name: "get_time", description: "the time",
      parameters: { type: "object", properties: {} } } }] });
  check("tools", ["stop", "length", "tool_calls"].includes(r.choices[0].finish_reason), JSON.stringify(r));
});
for (const [name, body, status] of [
  ["error: empty messages", { model, messages: [] }, 400],
  ["error: n > 1", { model, messages, n: 2 }, 400],
  ["error: unknown field", { model, messages, frobnicate: true }, 400],
]) {
  try {
    await client.chat.completions.create(body);
    check(name, false, "no error");
  } catch (e) {
    check(name, e instanceof OpenAI.APIError && e.status === status && typeof e.message === "string", `${e?.status} ${e}`);
  }
}
try {
  await new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 }).models.list();
  check("error: wrong key", apiKey === "" , "no error");
} catch (e) {
  check("error: wrong key", e instanceof OpenAI.AuthenticationError && e.status === 401, `${e?.status} ${e}`);
}
done();
