// webui_test.mjs - the web UI (GET /) in a real headless Chromium (playwright-core) against sniperd:
// the page and its security headers, a streamed reply with TTFT and tok/s, the stats panel
// updating, stop (the server cancels), markdown that never lets the model's text become markup
// (the page's renderer on crafted strings, a canned SSE reply through the whole page, and real
// replies), the contexts panel (save the chat, list, load it back and go on, delete, a bad name's
// error, the store's buttons and transfer progress on canned answers), and the API key flow against
// a second daemon started with --api-key, the model picker of a third serving a directory, and the
// GPU's line of a fourth on three levels (where the machine has a Vulkan device).
// Prints "ok NAME" / "FAIL NAME: why" / "SKIP NAME: why" and "N passed, N failed, N skipped".
// Usage: node webui_test.mjs URL KEYED_URL KEY SCREENSHOT_DIR MODELS_URL [GPU_URL]
import { chromium } from "playwright-core";

const [url, keyedUrl, key, shots, modelsUrl, gpuUrl] = process.argv.slice(2);
let passed = 0, failed = 0, skipped = 0;
function check(name, cond, why = "") {
  if (cond) { passed++; console.log(`ok     ${name}`); }
  else { failed++; console.log(`FAIL   ${name}: ${why}`); }
}
async function attempt(name, fn) {
  try { await fn(); } catch (e) { check(name, false, `threw ${process.env.VERBOSE ? e?.message : e?.message?.split("\n")[0] ?? e}`); }
}
const sleep = ms => new Promise(r => setTimeout(r, ms));
async function stats(base, headers = {}) {
  return (await fetch(base + "/v1/stats", { headers })).json();
}
const ALLOWED = new Set(["P", "BR", "PRE", "CODE", "STRONG", "EM", "UL", "OL", "LI", "A",
                         "H1", "H2", "H3", "H4", "H5", "H6"]);
// The elements below the last match of selector: [{tag, attrs: [[name, value]]}].
async function markup(page, selector) {
  return page.evaluate(sel => [...[...document.querySelectorAll(sel)].pop().querySelectorAll("*")]
    .map(e => ({ tag: e.tagName, attrs: [...e.attributes].map(a => [a.name, a.value]) })), selector);
}
// What the renderer may not produce: other tags, other attributes, links not to http(s).
function foreign(elements) {
  const bad = [];
  for (const { tag, attrs } of elements) {
    if (!ALLOWED.has(tag)) bad.push(tag);
    for (const [name, value] of attrs) {
      if (tag !== "A" || !["href", "target", "rel"].includes(name)) bad.push(`${tag}[${name}]`);
      if (name === "href" && !/^https?:\/\//.test(value)) bad.push(`href=${value}`);
    }
  }
  return bad;
}

const browser = await chromium.launch({ executablePath: "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-background-networking"] });
const consoleErrors = [];
try {
  const page = await (await browser.newContext()).newPage();
  page.on("console", m => { if (m.type() === "error" && !/Failed to load resource/.test(m.text())) consoleErrors.push(m.text()); });
  page.on("pageerror", e => consoleErrors.push(String(e)));
  page.setDefaultTimeout(15000);

  await attempt("page served with CSP", async () => {
    const r = await page.goto(url + "/");
    const h = r.headers();
    check("page served with CSP", r.status() === 200 && h["content-type"] === "text/html; charset=utf-8"
      && /default-src 'none'/.test(h["content-security-policy"] || "") && /sha256-/.test(h["content-security-policy"]),
      `${r.status()} ${JSON.stringify(h)}`);
  });
  await attempt("stats panel filled", async () => {
    await page.waitForFunction(() => document.getElementById("s-ctx").textContent.includes("tokens"));
    const s = await stats(url);
    const name = await page.textContent("#model-name");
    const ctx = await page.textContent("#s-ctx");
    check("stats panel filled", name === s.model && ctx.startsWith(String(s.n_ctx)), `${name} ${ctx}`);
    const gpu = await page.textContent("#s-gpu");
    check("the GPU's line says the CPU daemon is off it", !s.gpu.on && gpu === "off (CPU)", gpu);
  });

  // ---- a streamed reply
  const before = await page.textContent("#s-completion");
  await attempt("streamed reply", async () => {
    await page.fill("#max-tokens", "160"); /* long enough to span several frames on a fast machine */
    await page.fill("#temperature", "0");
    await page.evaluate(() => {
      window.__paints = [];
      new MutationObserver(() => {
        const b = document.querySelector(".msg.assistant .body");
        if (b) window.__paints.push(b.textContent.length);
      }).observe(document.getElementById("log"), { subtree: true, childList: true, characterData: true });
    });
    await page.fill("#input", "Hello there");
    await page.press("#input", "Enter");
    await page.waitForSelector(".msg.assistant[data-done='1']");
    const paints = await page.evaluate(() => window.__paints.filter(n => n > 0));
    const meta = await page.textContent(".msg.assistant .meta");
    const text = await page.textContent(".msg.assistant .body");
    check("streamed reply", text.length > 0 && new Set(paints).size >= 2,
      `text ${JSON.stringify(text.slice(0, 80))}, paint lengths ${paints.slice(0, 10)}`);
    check("reply shows TTFT, tokens and tok/s", /^TTFT \d+ ms · \d+ tokens · [\d.]+ tok\/s/.test(meta), meta);
    await page.screenshot({ path: `${shots}/reply.png` });
  });
  await attempt("stats update after a request", async () => {
    await page.waitForFunction(b => document.getElementById("s-completion").textContent !== b, before, { timeout: 6000 });
    const after = await page.textContent("#s-completion");
    const n = Number(await page.getAttribute(".msg.assistant", "data-tokens"));
    check("stats update after a request", n > 0 && Number(after) >= Number(before) + n, `${before} -> ${after} (${n})`);
  });
  await attempt("slots panel", async () => {
    const s = await stats(url);
    await page.waitForFunction(() => [...document.querySelectorAll("#s-slots .slot")]
      .some(c => /[1-9]\d* requests/.test(c.title)), null, { timeout: 6000 });
    const chips = await page.$$eval("#s-slots .slot", cs => cs.map(c => ({ state: c.dataset.state, title: c.title })));
    const step = await page.textContent("#s-step");
    check("slots panel: a chip per slot, the one that ran says so", s.parallel === 2 && chips.length === 2
      && chips.every(c => ["idle", "prefill", "decode"].includes(c.state)) && /tok, .* seq \//.test(step),
      `${s.parallel} ${JSON.stringify(chips)} ${step}`);
  });
  await attempt("real reply escaped", async () => {
    const bad = foreign(await markup(page, ".msg.assistant .body"));
    const r = await page.evaluate(() => ({ text: [...document.querySelectorAll(".msg.assistant .body")].pop().textContent,
                                            raw: turns[turns.length - 1].content }));
    const specials = r.raw.match(/<[^<>\s]{1,24}>/g) || [];
    check("real reply escaped", bad.length === 0 && specials.every(t => r.text.includes(t)),
      `foreign ${bad} specials ${specials} text ${JSON.stringify(r.text.slice(0, 120))}`);
  });

  // ---- stop a long generation
  await attempt("stop", async () => {
    const s0 = await stats(url);
    /* greedy on this turn runs to max tokens (30,000: no end token; "Count forever" ends itself
       after 967, a quarter of a second on a fast machine, before the click could land) */
    await page.click("#new-chat");
    await page.fill("#max-tokens", "30000");
    await page.fill("#input", "Count forever and ever");
    await page.press("#input", "Enter");
    await page.waitForFunction(() => {
      const b = [...document.querySelectorAll(".msg.assistant .body")].pop();
      return b && b.textContent.length > 20;
    });
    check("stop button enabled while streaming", await page.isEnabled("#stop") && !(await page.isEnabled("#send")));
    await page.click("#stop");
    await page.waitForSelector(".msg.assistant:last-child[data-done='1']");
    const len1 = await page.evaluate(() => [...document.querySelectorAll(".msg.assistant .body")].pop().textContent.length);
    const meta = await page.evaluate(() => [...document.querySelectorAll(".msg.assistant .meta")].pop().textContent);
    await sleep(800);
    const len2 = await page.evaluate(() => [...document.querySelectorAll(".msg.assistant .body")].pop().textContent.length);
    check("stop ends the reply", /stopped/.test(meta) && len1 === len2 && await page.isEnabled("#send"),
      `meta ${meta}, length ${len1} then ${len2}`);
    let s1 = s0;
    for (let i = 0; i < 50 && !(s1.cancelled > s0.cancelled && !s1.busy); i++) { await sleep(100); s1 = await stats(url); }
    check("stop cancels on the server", s1.cancelled === s0.cancelled + 1 && !s1.busy
      && s1.tokens.completion - s0.tokens.completion < 30000, JSON.stringify(s1));
    await page.screenshot({ path: `${shots}/stopped.png` });
  });

  // ---- the model's output is never markup
  await attempt("renderer escapes", async () => {
    const r = await page.evaluate(() => {
      const evil = "<script>window.__pwned=1<\/script> <img src=x onerror=\"window.__pwned=2\">\n" +
        "**bold** and *it* `<b>code</b>` [good](https://example.com/?a=1&b=\"x\") [bad](javascript:alert(1))\n" +
        "[sneaky](https://x.org/\"onmouseover=\"window.__pwned=3\") [spaced](https://x.org/ \"t\") <a href=\"javascript:alert(1)\">a</a>\n\n" +
        "- item <svg onload=window.__pwned=4>\n- two\n\n```html\n<iframe src=javascript:alert(1)></iframe>\n```";
      const div = document.createElement("div");
      div.innerHTML = renderMarkdown(evil);
      div.id = "rendered";
      document.body.appendChild(div);
      const links = [...div.querySelectorAll("a")].map(a => [a.getAttribute("href"), a.rel]);
      return { links, text: div.textContent,
                    strong: div.querySelector("strong")?.textContent, em: div.querySelector("em")?.textContent,
                    code: div.querySelector("p code")?.textContent, pre: div.querySelector("pre")?.textContent,
                    li: div.querySelectorAll("li").length };
    });
    r.bad = foreign(await markup(page, "#rendered"));
    await page.evaluate(() => document.getElementById("rendered").remove());
    await sleep(200);
    const pwned = await page.evaluate(() => window.__pwned);
    check("renderer escapes", r.bad.length === 0 && pwned === undefined && r.text.includes("<script>window.__pwned=1</script>")
      && r.text.includes("onerror") && r.pre.includes("<iframe"), `${r.bad} pwned=${pwned} ${JSON.stringify(r.text)}`);
    check("renderer markdown", r.strong === "bold" && r.em === "it" && r.code === "<b>code</b>" && r.li === 2
      && r.links.length === 2 && r.links.every(([h, rel]) => /^https:\/\//.test(h) && rel.includes("noopener"))
      && r.links[0][0] === 'https://example.com/?a=1&b="x"' && r.links[1][0] === 'https://x.org/"onmouseover="window.__pwned=3"',
      JSON.stringify(r));
  });
  await attempt("streamed markup shown as text", async () => {
    const frames = [{ role: "assistant" }, { reasoning_content: "thinking <b>hard</b>" },
      { content: "<script>window.__pwned=5</script>" }, { content: "<img src=x onerror=\"window.__pwned=6\">" },
      { content: " and **done**" }].map(d => `data: ${JSON.stringify({ choices: [{ index: 0, delta: d }] })}\n\n`);
    await page.route("**/v1/chat/completions", route => route.fulfill({ status: 200,
      headers: { "Content-Type": "text/event-stream" },
      body: frames.join("") + `data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\ndata: [DONE]\n\n` }));
    await page.click("#new-chat");
    await page.fill("#input", "canned");
    await page.press("#input", "Enter");
    await page.waitForSelector(".msg.assistant[data-done='1']");
    await page.unroute("**/v1/chat/completions");
    await sleep(300);
    const bad = foreign(await markup(page, ".msg.assistant .body"));
    const r = await page.evaluate(() => {
      const m = document.querySelector(".msg.assistant");
      return { text: m.querySelector(".body").textContent,
               think: m.querySelector("details.think > div").textContent, hidden: m.querySelector("details.think").hidden,
               pwned: window.__pwned, n: document.querySelectorAll(".msg").length };
    });
    check("streamed markup shown as text", bad.length === 0 && r.pwned === undefined
      && r.text.startsWith("<script>window.__pwned=5</script><img src=x onerror=\"window.__pwned=6\">") && r.n === 2,
      `${bad} ${JSON.stringify(r)}`);
    check("thinking in a collapsible block", !r.hidden && r.think === "thinking <b>hard</b>", JSON.stringify(r));
    await page.click("details.think > summary");
    await page.screenshot({ path: `${shots}/escaped.png` });
  });
  await attempt("new chat clears", async () => {
    await page.click("#new-chat");
    check("new chat clears", await page.evaluate(() => document.querySelectorAll(".msg").length === 0 && turns.length === 0));
  });

  // ---- contexts: save the chat, see it listed, new chat, load it back, delete it, a bad name
  const lastBody = () => page.evaluate(() => [...document.querySelectorAll(".msg.assistant .body")].pop().textContent);
  await attempt("context save", async () => {
    await page.fill("#system", "You are terse.");
    await page.fill("#max-tokens", "12");
    await page.fill("#temperature", "0");
    await page.fill("#input", "Remember the number 42");
    await page.press("#input", "Enter");
    await page.waitForSelector(".msg.assistant[data-done='1']");
    const reply = await lastBody();
    await page.fill("#ctx-name", "web-chat_1");
    await page.click("#ctx-save");
    await page.waitForSelector("#ctx-list li[data-name='web-chat_1']");
    const note = await page.textContent("#ctx-note");
    const item = await page.textContent("#ctx-list li[data-name='web-chat_1']");
    const listed = (await (await fetch(url + "/v1/context")).json()).data.find(c => c.name === "web-chat_1");
    check("context save", /^saved web-chat_1: [1-9]\d* tokens/.test(note) && listed && listed.tokens > 0
      && item.includes(`${listed.tokens} tokens`) && await page.isHidden("#ctx-error"), `${note} | ${item} | ${JSON.stringify(listed)}`);
    await page.screenshot({ path: `${shots}/context-saved.png` });

    await page.click("#new-chat");
    await page.fill("#system", "");
    check("new chat before the load", await page.evaluate(() => document.querySelectorAll(".msg").length === 0 && turns.length === 0));
    await page.click("#ctx-list li[data-name='web-chat_1'] button[data-action='load']");
    await page.waitForSelector(".msg.notice");
    const r = await page.evaluate(() => ({
      user: [...document.querySelectorAll(".msg.user")].map(e => e.textContent),
      assistant: [...document.querySelectorAll(".msg.assistant .body")].map(e => e.textContent),
      system: document.getElementById("system").value, turns: turns.map(t => t.role + ":" + t.content),
      notice: document.querySelector(".msg.notice").textContent }));
    check("context load restores the turns", r.user.length === 1 && r.user[0] === "Remember the number 42"
      && r.assistant.length === 1 && r.assistant[0] === reply && r.system === "You are terse."
      && r.turns.length === 2 && /Resumed context web-chat_1: 2 messages/.test(r.notice), JSON.stringify(r));
    await page.screenshot({ path: `${shots}/context-loaded.png` });

    const s0 = await stats(url);
    await page.fill("#input", "And now?");
    await page.press("#input", "Enter");
    await page.waitForFunction(() => document.querySelectorAll(".msg.assistant[data-done='1']").length === 2);
    const s1 = await stats(url);
    check("the chat goes on from the loaded context", !(await page.$(".msg.error"))
      && s1.tokens.cached - s0.tokens.cached >= listed.tokens, `cached ${s0.tokens.cached} -> ${s1.tokens.cached}, saved ${listed.tokens}`);
  });
  await attempt("context delete", async () => {
    page.once("dialog", d => d.dismiss());
    await page.click("#ctx-list li[data-name='web-chat_1'] button[data-action='delete']");
    await sleep(300);
    check("delete asks first (dismissed: kept)", await page.$("#ctx-list li[data-name='web-chat_1']") !== null);
    let asked = "";
    page.once("dialog", d => { asked = d.message(); d.accept(); });
    await page.click("#ctx-list li[data-name='web-chat_1'] button[data-action='delete']");
    await page.waitForSelector("#ctx-list li[data-name='web-chat_1']", { state: "detached" });
    const list = (await (await fetch(url + "/v1/context")).json()).data;
    check("context delete", /web-chat_1/.test(asked) && !list.some(c => c.name === "web-chat_1"), `${asked} ${JSON.stringify(list)}`);
  });
  await attempt("context bad name", async () => {
    const want = (await (await fetch(url + "/v1/context/save", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: "bad name!", messages: [{ role: "user", content: "x" }] }) })).json()).error.message;
    await page.fill("#ctx-name", "bad name!");
    await page.click("#ctx-save");
    await page.waitForSelector("#ctx-error:not([hidden])");
    const shown = await page.textContent("#ctx-error");
    check("a bad name shows the server's error", want && shown.includes(want), `want ${want}, shown ${shown}`);
    await page.screenshot({ path: `${shots}/context-error.png` });
  });
  await attempt("context store buttons", async () => {
    // a store, answered by canned responses: remote entries, a download whose progress /v1/stats reports
    const real = await stats(url);
    await page.route("**/v1/context", route => route.fulfill({ status: 200, contentType: "application/json",
      body: JSON.stringify({ object: "list", data: [{ name: "here", location: "local", tokens: 9, bytes: 4096,
        created: 1760000000, storage: "f16", zstd: false }],
        remote: [{ name: "far", location: "remote", bytes: 1 << 20, modified: "2026-01-01T00:00:00Z" }] }) }));
    await page.route("**/v1/stats", route => route.fulfill({ status: 200, contentType: "application/json",
      body: JSON.stringify(Object.assign({}, real, { transfer: { kind: "download", name: "far", done_bytes: 1 << 19, total_bytes: 1 << 20 } })) }));
    await page.route("**/v1/context/download", async route => {
      await sleep(1500);
      await route.fulfill({ status: 200, contentType: "application/json",
        body: JSON.stringify({ name: "far", bytes: 1 << 20, tokens: 9, ms: 1500 }) });
    });
    await page.click("#ctx-refresh");
    await page.waitForSelector("#ctx-remote li[data-name='far'] button[data-action='download']");
    const upload = await page.$("#ctx-list li[data-name='here'] button[data-action='upload']");
    await page.click("#ctx-remote li[data-name='far'] button[data-action='download']");
    await page.waitForFunction(() => /50 %/.test(document.getElementById("ctx-progress-text").textContent));
    const progress = await page.textContent("#ctx-progress-text");
    await page.screenshot({ path: `${shots}/context-transfer.png` });
    await page.unroute("**/v1/stats");
    await page.waitForFunction(() => /^download far: 1\.0 MiB/.test(document.getElementById("ctx-note").textContent));
    await page.unroute("**/v1/context/download");
    await page.unroute("**/v1/context");
    check("store: upload and download buttons, transfer progress", upload !== null && await page.isVisible("#ctx-remote-box")
      && progress === "download far: 512.0 KiB of 1.0 MiB (50 %)", progress);
    await page.click("#ctx-refresh");
    await page.waitForFunction(() => document.getElementById("ctx-remote-box").hidden);
    check("no store: no upload button", await page.$("#ctx-list button[data-action='upload']") === null);
  });

  check("no script errors or CSP violations", consoleErrors.length === 0, consoleErrors.join(" | "));

  // ---- the API key
  await attempt("api key", async () => {
    const ctx = await browser.newContext();
    const p = await ctx.newPage();
    p.setDefaultTimeout(15000);
    await p.goto(keyedUrl + "/");
    await p.waitForSelector("#keybox.shown");
    check("a 401 asks for the key", await p.isVisible("#key-input"));
    await p.screenshot({ path: `${shots}/key-prompt.png` });
    await p.fill("#key-input", key);
    await p.click("#keybox button[type=submit]");
    await p.waitForFunction(() => document.getElementById("status").textContent === "ready");
    check("the key is stored", await p.evaluate(() => localStorage.getItem("sniperd.apiKey")) === key);
    await p.fill("#max-tokens", "8");
    await p.fill("#input", "hi");
    await p.press("#input", "Enter");
    await p.waitForSelector(".msg.assistant[data-done='1']");
    const meta = await p.textContent(".msg.assistant .meta");
    check("chat works with the key", /\d+ tokens/.test(meta) && !(await p.$(".msg.error")), meta);
    await p.reload();
    await p.waitForFunction(() => document.getElementById("status").textContent === "ready");
    check("the key survives a reload", !(await p.isVisible("#keybox")));
    await p.evaluate(() => localStorage.setItem("sniperd.apiKey", "wrong"));
    await p.reload();
    await p.waitForSelector("#keybox.shown");
    check("a wrong stored key asks again", /refused/.test(await p.textContent("#key-why")));
    await ctx.close();
  });

  // ---- several models: the picker
  await attempt("model picker", async () => {
    const ctx = await browser.newContext();
    const p = await ctx.newPage();
    p.setDefaultTimeout(15000);
    await p.goto(modelsUrl + "/");
    await p.waitForFunction(() => !document.getElementById("model-pick").hidden);
    const opts = await p.$$eval("#model-pick option", os => os.map(o => ({ v: o.value, t: o.textContent, d: o.disabled })));
    check("the picker lists every model with its state, the broken one disabled",
      opts.length === 3 && opts.every(o => /\u2014 (unloaded|loaded|failed|loading)/.test(o.t))
      && opts.find(o => o.v === "broken")?.d === true && (await p.inputValue("#model-pick")) === "alpha",
      JSON.stringify(opts));
    await p.selectOption("#model-pick", "beta");
    await p.fill("#max-tokens", "8");
    await p.fill("#input", "hello");
    await p.press("#input", "Enter");
    await p.waitForSelector(".msg.assistant[data-done='1']");
    const s = await stats(modelsUrl);
    const by = Object.fromEntries(s.models.map(m => [m.id, m]));
    check("the reply came from the picked model", by.beta?.loads === 1 && by.alpha?.loads === 0
      && s.model === "beta", JSON.stringify(s.models.map(m => [m.id, m.state, m.loads])));
    await p.reload();
    await p.waitForFunction(() => !document.getElementById("model-pick").hidden);
    await p.waitForFunction(() => /loaded/.test(document.querySelector("#model-pick option[value=beta]")?.textContent || ""));
    check("the choice survives a reload", (await p.inputValue("#model-pick")) === "beta");
    await p.screenshot({ path: `${shots}/models.png` });
    await ctx.close();
  });
  // ---- the GPU's line on three levels: the VRAM slots and where the routed pairs ran
  if (!gpuUrl) {
    skipped++;
    console.log("SKIP   the GPU's line on three levels: no Vulkan device ran the fourth daemon");
  } else await attempt("the GPU's line on three levels", async () => {
    const ctx = await browser.newContext();
    const p = await ctx.newPage();
    p.setDefaultTimeout(60000);
    await p.goto(gpuUrl + "/");
    await p.fill("#max-tokens", "4");
    await p.fill("#input", "hello");
    await p.press("#input", "Enter");
    await p.waitForSelector(".msg.assistant[data-done='1']");
    await p.waitForFunction(() => /GPU \/ [1-9]/.test(document.getElementById("s-gpu").textContent));
    const g = (await stats(gpuUrl)).gpu;
    const text = await p.textContent("#s-gpu");
    const m = text.match(/^(\d+) of (\d+) experts a layer in VRAM, ([\d.]+) % hits; pairs (\d+) GPU \/ (\d+) CPU$/);
    check("the GPU's line on three levels", g.on && m && +m[1] === g.experts_in_vram && +m[2] === g.experts_per_layer
      && m[1] === "2" && +m[4] > 0 && +m[5] > 0 && +m[4] <= g.pairs_on_gpu && +m[5] <= g.pairs_on_cpu,
      `${text} ${JSON.stringify(g)}`);
    await ctx.close();
  });
} finally {
  await browser.close();
}
console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed ? 1 : 0);
