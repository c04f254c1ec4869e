// responses_test.mjs - sniperd's /v1/responses through the official OpenAI JavaScript client (npm
// "openai", client.responses): a plain response, the same streamed (events in the documented
// order, the text assembled equal to the whole reply's at temperature 0, and the SDK's stream
// helper), a function call forced by tool_choice (its arguments parse), structured output
// (text.format json_schema), a second turn through previous_response_id whose usage shows cached
// input tokens, retrieve/delete, a 404, and reasoning items on a scripted gpt-oss model.
// Usage: node responses_test.mjs BASE_URL REASON_BASE_URL API_KEY
import OpenAI from "openai";
import { attempt, check, done } from "./check.mjs";

const [baseURL, reasonURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });
const reason = new OpenAI({ baseURL: reasonURL, apiKey, maxRetries: 0, timeout: 60000 });
const model = (await client.models.list()).data[0]?.id;
const ask = { model, input: "Hello", instructions: "You are terse.", max_output_tokens: 12,
  temperature: 0 };
// the text of a response's message items (create() adds output_text; stream and retrieve do not)
const textOf = (r) => r.output.filter((it) => it.type === "message")
  .flatMap((it) => it.content).map((p) => p.text ?? "").join("");
const tools = [{ type: "function", name: "get_weather", description: "the weather in a city",
  parameters: { type: "object", properties: { city: { type: "string" } } }, strict: false }];

let whole = null;
await attempt("responses.create", async () => {
  whole = await client.responses.create(ask);
  const u = whole.usage;
  check("responses.create", whole.object === "response" && whole.id.startsWith("resp_")
    && whole.output[0].type === "message" && typeof whole.output_text === "string"
    && whole.output_text.length > 0 && u.output_tokens === 12
    && u.total_tokens === u.input_tokens + u.output_tokens
    && u.input_tokens_details.cached_tokens >= 0, JSON.stringify(whole));
});
await attempt("responses stream", async () => {
  const stream = await client.responses.create({ ...ask, stream: true });
  const types = [];
  let text = "", last = null;
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === "response.output_text.delta") text += ev.delta;
    last = ev;
  }
  const head = ["response.created", "response.in_progress", "response.output_item.added",
    "response.content_part.added", "response.output_text.delta"];
  const tail = ["response.output_text.done", "response.content_part.done",
    "response.output_item.done", "response.incomplete"];
  check("responses stream: events in order", head.every((t, i) => types[i] === t)
    && tail.every((t, i) => types[types.length - 4 + i] === t), types.join(" "));
  check("responses stream: text equals the whole reply's", text === whole?.output_text
    && last.response.usage.output_tokens === 12, `${JSON.stringify(text)} vs ${JSON.stringify(whole?.output_text)}`);
});
await attempt("responses.stream helper", async () => {
  const s = client.responses.stream({ ...ask, max_output_tokens: 6 });
  let deltas = "";
  s.on("response.output_text.delta", (e) => { deltas += e.delta; });
  const final = await s.finalResponse();
  check("responses.stream helper", textOf(final) === deltas && deltas.length > 0,
    `${JSON.stringify(textOf(final))} vs ${JSON.stringify(deltas)}`);
});
await attempt("forced function call", async () => {
  // a tiny random model: the JSON grammar may still be writing when the tokens run out, so try
  // seeds (an extension, as in chat completions) until one call completes
  let call = null, bad = [];
  for (let seed = 0; seed < 12 && !call; seed++) {
    const r = await client.responses.create({ model, input: "Weather in Paris?", tools,
      tool_choice: { type: "function", name: "get_weather" }, max_output_tokens: 64, seed });
    const it = r.output[0];
    if (it?.type !== "function_call" || it.name !== "get_weather" || !it.call_id) bad.push(r);
    else if (r.status === "completed") call = it;
  }
  let args = null;
  try { args = JSON.parse(call?.arguments); } catch { args = null; }
  check("forced function call: arguments parse", call && args && typeof args === "object"
    && !bad.length, JSON.stringify(call ?? bad[0]));
});
await attempt("structured output", async () => {
  const schema = { type: "object", additionalProperties: true };
  let parsed = null;
  for (let seed = 0; seed < 12 && !parsed; seed++) {
    const r = await client.responses.create({ model, input: "A JSON object, please",
      text: { format: { type: "json_schema", name: "obj", schema, strict: false } },
      max_output_tokens: 64, seed });
    if (r.status === "completed") parsed = JSON.parse(r.output_text);
  }
  check("structured output: one JSON object", parsed !== null && typeof parsed === "object"
    && !Array.isArray(parsed), JSON.stringify(parsed));
});
await attempt("previous_response_id", async () => {
  const r1 = await client.responses.create({ model, input: "Remember: blue.",
    max_output_tokens: 6, temperature: 0 });
  const r2 = await client.responses.create({ model, input: "What colour?", max_output_tokens: 6,
    temperature: 0, previous_response_id: r1.id });
  check("previous_response_id: cached input tokens",
    r2.usage.input_tokens_details.cached_tokens >= r1.usage.input_tokens
    && r2.previous_response_id === r1.id, `${JSON.stringify(r1.usage)} ${JSON.stringify(r2.usage)}`);
  const got = await client.responses.retrieve(r2.id);
  check("responses.retrieve", got.id === r2.id && textOf(got) === r2.output_text,
    JSON.stringify(got));
  await client.responses.del(r1.id);
  try {
    await client.responses.create({ model, input: "x", previous_response_id: r1.id });
    check("deleted previous_response_id: 404", false, "no error");
  } catch (e) {
    check("deleted previous_response_id: 404", e instanceof OpenAI.NotFoundError
      && e.param === "previous_response_id", `${e?.status} ${e}`);
  }
});
await attempt("error: hosted tool", async () => {
  try {
    await client.responses.create({ model, input: "x", tools: [{ type: "web_search_preview" }] });
    check("error: hosted tool", false, "no error");
  } catch (e) {
    check("error: hosted tool", e instanceof OpenAI.BadRequestError
      && e.message.includes("web_search_preview"), `${e?.status} ${e}`);
  }
});
// the scripted gpt-oss model: <|channel|>analysis<|message|>Hm<|end|> then OK
await attempt("reasoning items", async () => {
  const r = await reason.responses.create({ model, input: "Hello", max_output_tokens: 32,
    temperature: 0, reasoning: { effort: "low", summary: "auto" } });
  const rs = r.output.find((it) => it.type === "reasoning");
  check("reasoning items", rs?.content?.[0]?.text === "Hm" && rs.summary[0]?.text === "Hm"
    && r.output_text === "OK" && r.reasoning.effort === "low", JSON.stringify(r.output));
  const stream = await reason.responses.create({ model, input: "Hello", max_output_tokens: 32,
    temperature: 0, reasoning: { effort: "low", summary: "auto" }, stream: true });
  let thought = "", summary = "", text = "";
  for await (const ev of stream) {
    if (ev.type === "response.reasoning_text.delta") thought += ev.delta;
    if (ev.type === "response.reasoning_summary_text.delta") summary += ev.delta;
    if (ev.type === "response.output_text.delta") text += ev.delta;
  }
  check("reasoning stream", thought === "Hm" && summary === "Hm" && text === "OK",
    `${thought} ${summary} ${text}`);
});
done();
