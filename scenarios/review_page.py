"""The labelling review page: one self-contained HTML file, no server, no network.

Each trace is a list of its calls (results folded, opened on demand), the proposed
onset highlighted with its evidence, the loop's proposed severity (runaway / blip, the
redundant calls in a row) and how the run ended; least-confident traces come first.
Accepting a proposed onset confirms the severity shown with it (the export carries it).
Keys:

    j / ↓   next trace          k / ↑   previous trace
    a       accept the proposal c       mark clean          m   mark ambiguous
    u       move the onset up (earlier)                     d   move it down (later)
    o       open/close the onset call's result              e   export the decisions

The export downloads ``labels.json`` in the labels-file format of
``scenarios.label_files`` (re-importable by ``label`` as human-confirmed labels).

Trace text is untrusted: the data travels as gzipped JSON in base64 (so nothing of it can
close the ``<script>`` block it sits in, and the page stays small), and the page only ever
puts it into the document as text (``textContent``), never as markup. A
Content-Security-Policy forbids every network request.
"""
from __future__ import annotations

import base64
import gzip
import html
import json
import os
import re
from typing import Any

#: Longest argument / result text kept per call on the page, so that it loads fast with
#: thousands of traces (the trace file keeps everything); the calls the evidence names
#: (the judged call and the one it repeats) keep more.
MAX_TEXT = 1500
MAX_EVIDENCE_TEXT = 8000
#: Fast rather than small: the page is written once per run and read once per review.
GZIP_LEVEL = 3

_TRACE_KEYS = ("episode", "calls_sha1", "n_calls", "loops", "onset", "kind", "confidence", "source", "evidence",
               "decision", "outcome", "persistence", "to_end", "severity")


def _clip(text: Any, limit: int) -> Any:
    if isinstance(text, str) and len(text) > limit:
        return text[:limit] + f"\u2026 [{len(text) - limit} more characters in the trace file]"
    return text


def page_data(proposals: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]]]:
    """The traces' index (what a trace's header shows) and, apart, each trace's calls."""
    index, calls = [], []
    for p in proposals:
        index.append({k: p.get(k) for k in _TRACE_KEYS})
        named = {i for ev in p.get("evidence") or [] for i in (ev.get("call"), ev.get("repeats"))}
        calls.append([
            {"tool": c.get("tool"), "args": _clip(c.get("args"), MAX_TEXT),
             "result": _clip(c.get("result"), MAX_EVIDENCE_TEXT if k in named else MAX_TEXT), "error": bool(c.get("error"))}
            for k, c in enumerate(p.get("calls", []))
        ])
    return index, calls


def packed(value: Any) -> str:
    """JSON, gzipped, in base64: a fraction of the bytes for the browser to read, and
    nothing in it that HTML could take for markup."""
    raw = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return base64.b64encode(gzip.compress(raw, compresslevel=GZIP_LEVEL, mtime=0)).decode("ascii")


def render(proposals: list[dict[str, Any]], title: str = "traces") -> str:
    """The page for ``proposals`` (``Proposal.to_dict()``s, already in review order)."""
    index, calls = page_data(proposals)
    # Each trace's calls are packed apart and unpacked when the trace is first shown, so
    # opening the page costs the index, not every result of every trace.
    data = json.dumps({"index": packed(index), "calls": [packed(c) for c in calls]}, separators=(",", ":"))
    fill = {"TITLE": html.escape(title), "DATA": data}
    # One pass, so text put in for one slot is never searched for another.
    return re.sub(r"\{\{(TITLE|DATA)\}\}", lambda m: fill[m.group(1)], _TEMPLATE)


def write_review_page(path: str | os.PathLike, proposals: list[dict[str, Any]], title: str = "traces") -> None:
    from scenarios.files import atomic_file  # the page itself needs nothing from sim

    with atomic_file(path) as fh:
        fh.write(render(proposals, title))


_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>loopbench review: {{TITLE}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#f6f6f4}
header{position:sticky;top:0;background:#263238;color:#eee;padding:8px 16px;z-index:2;display:flex;gap:16px;align-items:center;flex-wrap:wrap}
header h1{font-size:16px;margin:0}
header kbd{background:#455a64;border-radius:3px;padding:0 4px;font-size:12px}
header button{font:inherit;padding:2px 10px}
main{padding:8px 16px}
section.trace{background:#fff;border:1px solid #ddd;border-radius:6px;margin:8px 0;padding:6px 10px}
section.trace.current{border:2px solid #1565c0;box-shadow:0 0 0 3px #bbdefb}
.thead{display:flex;gap:12px;align-items:baseline;flex-wrap:wrap}
.eid{font-weight:600;font-family:monospace}
.conf{color:#555}
.badge{border-radius:10px;padding:0 8px;font-size:12px;background:#eee}
.badge.accepted{background:#c8e6c9}.badge.corrected{background:#fff59d}.badge.clean{background:#b3e5fc}.badge.ambiguous{background:#ffccbc}
ol.calls{margin:4px 0 0;padding-left:36px;font-family:monospace;font-size:12.5px}
ol.calls li{padding:1px 4px;border-left:3px solid transparent}
ol.calls li.onset{background:#ffebee;border-left-color:#c62828}
ol.calls li.proposed:not(.onset){border-left-color:#ef9a9a}
ol.calls li.after{color:#777}
ol.calls li.near{border-left-color:#ffb300;background:#fffde7}
.tool{font-weight:600}.err{color:#c62828}
.sev,.outcome{font-size:12px;border-radius:10px;padding:0 8px;background:#eee}
.sev.runaway{background:#ffcdd2}.sev.blip{background:#e1f5fe}.outcome.success{background:#c8e6c9}.outcome.failure{background:#ffe0b2}
.evidence{font-family:system-ui,sans-serif;font-size:12.5px;background:#fff8e1;border:1px solid #ffe082;border-radius:4px;padding:2px 6px;margin:2px 0}
details pre{white-space:pre-wrap;word-break:break-word;max-height:18em;overflow:auto;background:#fafafa;margin:2px 0;padding:4px}
</style></head><body>
<header><h1>Review: <span id="title">{{TITLE}}</span></h1>
<span id="status"></span>
<span><kbd>j</kbd>/<kbd>k</kbd> trace · <kbd>a</kbd> accept · <kbd>u</kbd>/<kbd>d</kbd> onset up/down · <kbd>c</kbd> clean · <kbd>m</kbd> ambiguous · <kbd>o</kbd> open result · <kbd>e</kbd> export</span>
<button id="export" type="button">Export labels.json</button></header>
<main id="traces"></main>
<script id="data" type="application/octet-stream">{{DATA}}</script>
<script>
"use strict";
async function unpack(b64) {
  const bin = atob(b64), bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}
const PACK = JSON.parse(document.getElementById("data").textContent);
unpack(PACK.index).then(start);

function start(TRACES) {
const state = TRACES.map(t => ({onset: t.onset, decision: t.source === "human" ? (t.decision || "accepted") : null,
                                ambiguous: false, rendered: false, calls: null, loading: null}));
let cur = 0;
const main = document.getElementById("traces");
const el = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls;
                                 if (text !== undefined && text !== null) e.textContent = String(text); return e; };
const short = (s, n) => (s && s.length > n) ? s.slice(0, n) + "\\u2026" : (s || "");

function evidenceText(ev) {
  if (!ev) return "";
  const parts = [];
  const rep = ev.repeats !== null && ev.repeats !== undefined ? " repeats call #" + ev.repeats : "";
  if (ev.kind === "near") parts.push("closest to a loop, judged not redundant: call #" + ev.call + rep);
  else parts.push(ev.kind + ": call #" + ev.call + rep);
  if (typeof ev.similarity === "number") parts.push("argument similarity " + ev.similarity.toFixed(2));
  parts.push("new in result: " + (ev.new_in_result && ev.new_in_result.length ? ev.new_in_result.join(" ") : "nothing")
             + (ev.new_share ? " (" + (100 * ev.new_share).toFixed(1) + "% new)" : ""));
  if (ev.note) parts.push(ev.note);
  return parts.join(" \\u00b7 ");
}

function header(i) {
  const t = TRACES[i], s = state[i], h = el("div", "thead");
  h.append(el("span", "eid", t.episode), el("span", "conf", "confidence " + Number(t.confidence).toFixed(2)));
  const prop = t.loops ? "proposed onset #" + t.onset + " (" + (t.kind || "loop") + ")" : "proposed clean";
  h.append(el("span", "prop", prop), el("span", "calls", t.n_calls + " calls"));
  if (t.loops && t.severity) h.append(el("span", "sev " + t.severity, t.severity + ": " + t.persistence
                                         + " redundant in a row" + (t.to_end ? ", to the end" : "")));
  h.append(el("span", "outcome " + (t.outcome || "unknown"), "run: " + (t.outcome || "unknown")));
  const cur = s.onset === null || s.onset === undefined ? "clean" : "onset #" + s.onset;
  const b = el("span", "badge " + (s.decision || ""), s.decision ? s.decision + " \\u2192 " + cur : "undecided");
  b.dataset.role = "decision";
  h.append(b);
  return h;
}

function renderCalls(i, sec) {
  const t = TRACES[i], s = state[i], ol = el("ol", "calls");
  ol.start = 0;
  s.calls.forEach((c, k) => {
    const li = el("li");
    li.dataset.call = k;
    if (k === s.onset) li.classList.add("onset");
    if (k === t.onset) li.classList.add("proposed");
    if (!t.loops && t.evidence && t.evidence.length && t.evidence[0].call === k) li.classList.add("near");
    if (s.onset !== null && s.onset !== undefined && k > s.onset) li.classList.add("after");
    li.append(el("span", "tool", c.tool), document.createTextNode(" "), el("span", "args", short(c.args, 240)));
    if (c.error) li.append(document.createTextNode(" "), el("span", "err", "error"));
    const d = el("details");
    const label = c.result === null ? "no result recorded" : "result (" + c.result.length + " chars)";
    d.append(el("summary", null, label));
    d.addEventListener("toggle", () => { if (d.open && !d.dataset.filled) {
      d.append(el("pre", null, c.result === null ? "" : c.result)); d.dataset.filled = "1"; } });
    if (c.result !== null) li.append(d); else li.append(el("div", "conf", "no result recorded"));
    if (k === s.onset && t.evidence && t.evidence.length && (t.evidence[0].call === k))
      li.append(el("div", "evidence", evidenceText(t.evidence[0])));
    ol.append(li);
  });
  if (!t.loops && t.evidence && t.evidence.length) sec.append(el("div", "evidence", evidenceText(t.evidence[0])));
  sec.append(ol);
}

function draw(i) {
  const sec = main.children[i];
  const s = state[i];
  sec.replaceChildren(header(i));
  if (s.rendered && s.calls) renderCalls(i, sec);
  else if (s.rendered) {
    if (!s.loading) s.loading = unpack(PACK.calls[i]).then(c => { s.calls = c; });
    s.loading.then(() => draw(i));
  }
  sec.classList.toggle("current", i === cur);
}

const observer = new IntersectionObserver(entries => {
  for (const e of entries) if (e.isIntersecting) { const i = +e.target.dataset.i;
    if (!state[i].rendered) { state[i].rendered = true; draw(i); } observer.unobserve(e.target); }
}, {rootMargin: "400px"});

const frag = document.createDocumentFragment();
TRACES.forEach((t, i) => { const sec = el("section", "trace"); sec.dataset.i = i; sec.append(header(i));
                           sec.style.minHeight = "3em"; frag.append(sec); });
main.append(frag);
for (const sec of main.children) observer.observe(sec);

function status() {
  const done = state.filter(s => s.decision).length;
  document.getElementById("status").textContent = done + " of " + TRACES.length + " decided";
}

function select(i) {
  if (i < 0 || i >= TRACES.length) return;
  const old = cur; cur = i;
  main.children[old].classList.remove("current");
  state[i].rendered = true; draw(i);
  main.children[i].scrollIntoView({block: "nearest"});
}

function decide(decision) {
  const t = TRACES[cur], s = state[cur];
  if (decision === "accepted") { s.onset = t.onset; s.ambiguous = false; }
  if (decision === "clean") { s.onset = null; s.ambiguous = false; }
  if (decision === "ambiguous") s.ambiguous = true;
  s.decision = decision; draw(cur); status();
}

function moveOnset(step) {
  const t = TRACES[cur], s = state[cur], n = t.n_calls;
  if (!n) return;
  let k = (s.onset === null || s.onset === undefined) ? (step > 0 ? 0 : n - 1) : s.onset + step;
  k = Math.max(0, Math.min(n - 1, k));
  s.onset = k; s.decision = (k === t.onset && t.loops) ? "accepted" : "corrected"; s.ambiguous = false;
  draw(cur); status();
}

function entries() {
  const out = [];
  TRACES.forEach((t, i) => { const s = state[i]; if (!s.decision) return;
    const loops = s.onset !== null && s.onset !== undefined;
    out.push({episode: t.episode, calls_sha1: t.calls_sha1, n_calls: t.n_calls, loops: loops,
              onset: loops ? s.onset : null, kind: loops && s.onset === t.onset ? t.kind : null,
              ambiguous: s.ambiguous, decision: s.decision, source: "human",
              // Accepting the proposed onset confirms the severity shown with it.
              ...(loops && s.onset === t.onset && t.severity ? {persistence: t.persistence, to_end: t.to_end,
                                                                 severity: t.severity} : {})}); });
  return out;
}

function exportLabels() {
  const doc = {format: "loopbench-labels", rubric_version: 1, traces: entries()};
  const blob = new Blob([JSON.stringify(doc, null, 1) + "\\n"], {type: "application/json"});
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob); a.download = "labels.json";
  document.body.append(a); a.click(); a.remove();
}
document.getElementById("export").addEventListener("click", exportLabels);

document.addEventListener("keydown", ev => {
  if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const key = ev.key;
  const act = {j: () => select(cur + 1), ArrowDown: () => select(cur + 1), k: () => select(cur - 1),
               ArrowUp: () => select(cur - 1), a: () => { decide("accepted"); select(cur + 1); },
               c: () => { decide("clean"); select(cur + 1); }, m: () => { decide("ambiguous"); select(cur + 1); },
               u: () => moveOnset(-1), d: () => moveOnset(1), e: exportLabels,
               o: () => { const li = main.children[cur].querySelector("li.onset details");
                          if (li) li.open = !li.open; }}[key];
  if (act) { ev.preventDefault(); act(); }
});
status();
if (TRACES.length) select(0);
window.loopbenchReview = {entries: entries, state: state};
}
</script></body></html>
"""
