// tests/unit/server/check_dashboard.js: runs the /dashboard page's inline
// script in node against a fake DOM (no headless browser here) and checks
// that it parses, renders dashboard_sample.json into the table, bars and
// charts, survives malformed answers, and shows "disconnected" on errors.
// usage: node check_dashboard.js <dashboard.html> <dashboard_sample.json>
"use strict";
const fs = require("fs");
const vm = require("vm");

const [htmlPath, samplePath] = process.argv.slice(2);
const html = fs.readFileSync(htmlPath, "utf8");
const sample = JSON.parse(fs.readFileSync(samplePath, "utf8"));
let checks = 0, failures = 0;
function check(cond, what) {
  checks++;
  if (!cond) { failures++; console.error("FAIL: " + what); }
}

const scripts = [...html.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1]);
check(scripts.length === 1, "exactly one inline script, got " + scripts.length);
const script = new vm.Script(scripts[0], { filename: "dashboard.html<script>" });  // throws on a syntax error

// --- fake DOM: canvases record their drawing calls
function fakeCanvas() {
  const calls = [];
  const store = {};
  const ctx = new Proxy(store, {
    get(t, p) {
      if (p in t) return t[p];
      return (...args) => { calls.push([p, args]); return { width: 8 * String(args[0] || "").length }; };
    },
    set(t, p, v) { t[p] = v; return true; },
  });
  return { clientWidth: 460, clientHeight: 200, width: 0, height: 0, calls,
           getContext: () => ctx };
}
const elems = {
  throughput: fakeCanvas(), queue: fakeCanvas(), batches: fakeCanvas(),
  latency: { innerHTML: "" }, gpus: { innerHTML: "" },
  status: { textContent: "", className: "" }, updated: { textContent: "" },
};
let nextAnswer = null;  // what the fake fetch does next
const sandbox = {
  document: { getElementById: (id) => elems[id] || null, body: { className: "" } },
  fetch: (url) => {
    check(url === "/dashboard.json", "fetches /dashboard.json, got " + url);
    const a = nextAnswer;
    if (a instanceof Error) return Promise.reject(a);
    if (typeof a === "number") return Promise.resolve({ ok: false, status: a });
    return Promise.resolve({ ok: true, status: 200, json: () => Promise.resolve(a) });
  },
  setTimeout: () => 1, clearTimeout: () => {},  // polling is driven by hand
  AbortController, Promise, Date, Math, JSON, Object, Array, String, Number, isFinite, console,
  devicePixelRatio: 1,
};
sandbox.window = sandbox;
vm.createContext(sandbox);

async function main() {
  nextAnswer = sample;
  script.runInContext(sandbox);  // starts the first poll itself
  await new Promise((r) => setImmediate(r));
  const d = sandbox.inferdDashboard;
  check(d && typeof d.poll === "function", "window.inferdDashboard exposed");
  await d.poll();  // first poll may still be settling; a second one lines up after it
  for (const id of ["throughput", "queue", "batches"]) elems[id].calls.length = 0;
  await d.poll();  // drawing calls of exactly one render

  check(elems.status.textContent === "connected", "status connected: " + elems.status.textContent);
  check(elems.status.className === "ok", "status class ok");
  const lat = elems.latency.innerHTML;
  check(lat.includes(">mlp <"), "table names mlp");
  check(lat.includes("resnet&lt;b&gt;") && !lat.includes("resnet<b>"), "model name escaped");
  for (const s of ["request", "queue", "compute_input", "compute_infer", "compute_output"])
    check(lat.split(">" + s + "<").length - 1 === 2, "stage row " + s + " per model");
  for (const v of ["850 \u00b5s", "7.10 ms", "2.50 ms", "1.25 s", "9.0 \u00b5s", "123", "457"])
    check(lat.includes(">" + v + "<"), "table shows " + v);
  check((lat.match(/<tr/g) || []).length === 11, "1 header + 2 models x 5 stages rows");
  const gp = elems.gpus.innerHTML;
  check(gp.includes("83% busy") && gp.includes("width:83.0%"), "GPU busy bar 83%: " + gp);
  check(gp.includes("20.0 GiB / 80.0 GiB") && gp.includes("width:25.0%"), "GPU memory bar");
  check(gp.includes("NVIDIA H100"), "GPU name");

  const texts = (c) => c.calls.filter((x) => x[0] === "fillText").map((x) => String(x[1][0]));
  const bt = texts(elems.batches);
  for (const s of ["1", "4", "8", "16"]) check(bt.includes(s), "batch size label " + s);
  check(!bt.includes("no batches yet"), "batches drawn");
  // 4 sizes x 2 models bars + 2 legend swatches.
  check(elems.batches.calls.filter((x) => x[0] === "fillRect").length === 10, "batch bars drawn");
  check(texts(elems.throughput).includes("mlp v1"), "throughput legend");
  check(elems.throughput.calls.some((x) => x[0] === "lineTo"), "throughput line drawn");
  check(texts(elems.queue).includes("now"), "queue chart x axis");

  // Rate derived from the success counter when throughput_rps is missing.
  const t0 = sample.time_ms;
  const h = d.state.history["mlp:1"];
  const before = h.points.length;
  const next = JSON.parse(JSON.stringify(sample));
  next.time_ms = t0 + 1000;
  delete next.models[0].throughput_rps;
  next.models[0].success = 110;
  nextAnswer = next;
  await d.poll();
  check(h.points.length === before + 1, "one point per poll");
  check(h.points[h.points.length - 1][1] === 10, "derived rps 10, got " + h.points[h.points.length - 1][1]);

  // Fetch errors.
  nextAnswer = new Error("connection refused");
  await d.poll();
  check(elems.status.textContent.startsWith("disconnected"), "disconnected on error: " + elems.status.textContent);
  check(elems.status.className === "bad" && sandbox.document.body.className === "stale", "stale look");
  nextAnswer = 500;
  await d.poll();
  check(elems.status.textContent === "disconnected (HTTP 500)", "HTTP 500: " + elems.status.textContent);

  // Malformed answers: rendered without throwing (a throw would read "disconnected (...)").
  const bad = [null, {}, { models: "x", gpus: 7 }, { models: [null, 3, "s"] },
    { time_ms: t0 + 2000, models: [{ name: "mlp", version: 1, latency_us: 5, batch_sizes: [[null], "x", [2], [3, "a"]],
      throughput_rps: "fast", queue_depth: null }] },
    { models: [{ latency_us: { request: null, queue: { p50: "x" } } }], gpus: [{}, null, { busy: 7 }] }];
  for (const b of bad) {
    nextAnswer = b;
    await d.poll();
    check(elems.status.textContent === "connected", "malformed " + JSON.stringify(b) + ": " + elems.status.textContent);
  }
  // After a recovery the page is live again.
  check(sandbox.document.body.className === "", "not stale after recovery");

  // The window keeps 120 s; a clock going back starts history afresh.
  nextAnswer = Object.assign({}, sample, { time_ms: t0 + 200000 });
  await d.poll();
  check(h.points.every((p) => p[0] >= t0 + 200000 - 120000), "points older than 120 s dropped");
  nextAnswer = Object.assign({}, sample, { time_ms: t0 });
  await d.poll();
  check(d.state.history["mlp:1"].points.length === 1, "history reset when time goes back");

  console.error(`${checks} checks, ${failures} failed`);
  process.exit(failures ? 1 : 0);
}
main().catch((e) => { console.error("FAIL: " + (e && e.stack || e)); process.exit(1); });
