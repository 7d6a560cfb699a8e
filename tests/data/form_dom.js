// A minimal DOM for running robench annotate's form (robench/report/templates/annotate.html.j2) in node, as a
// reader would use it: tests/test_annotate.py. Usage: node form_dom.js FORM.html ANSWERS.json
// ANSWERS: {"label": value for every part-1 item, "meaning": ..., "fluent": ...}. Prints a JSON report.
"use strict";
const fs = require("fs");
const [html, answers] = [fs.readFileSync(process.argv[2], "utf8"), JSON.parse(fs.readFileSync(process.argv[3], "utf8"))];

class El {
  constructor(tag, id) { this.tagName = tag; this.id = id || null; this.children = []; this.className = ""; this.text = null;
    this.listeners = {}; this.disabled = false; this.checked = false; this.parent = null; this.type = ""; this.name = "";
    this.value = ""; this.href = ""; this.download = "";
    const el = this;
    this.classList = { toggle(c, on) { const s = new Set(el.className.split(" ").filter(Boolean));
      if (on === undefined) on = !s.has(c); if (on) s.add(c); else s.delete(c); el.className = [...s].join(" "); },
      contains(c) { return el.className.split(" ").includes(c); } }; }
  get textContent() { return this.text !== null ? this.text : this.children.map((c) => c.textContent).join(""); }
  set textContent(v) { this.text = String(v); this.children = []; }
  appendChild(c) { this.children.push(c); c.parent = this; return c; }
  remove() { if (this.parent) this.parent.children = this.parent.children.filter((x) => x !== this); }
  addEventListener(type, f) { (this.listeners[type] = this.listeners[type] || []).push(f); }
  fire(type) { (this.listeners[type] || []).forEach((f) => f({})); }
  click() { if (!this.disabled) this.fire("click"); }
  all() { return [this, ...this.children.flatMap((c) => (c.all ? c.all() : []))]; }
}
const script = (id) => { const m = html.match(new RegExp(`<script${id}>([\\s\\S]*?)</script>`)); return m[1]; };
const ids = ["part1", "part2", "part2wrap", "open2", "save", "progress"];
let downloads = [];
const storage = new Map();

function page() {
  const byId = Object.fromEntries(ids.map((id) => [id, new El("div", id)]));
  byId["part2wrap"].className = "hidden";
  byId["open2"].disabled = html.includes('id="open2" disabled');
  byId["sheet-data"] = new El("script", "sheet-data");
  byId["sheet-data"].text = script(' id="sheet-data" type="application/json"');
  const body = new El("body");
  global.document = {
    getElementById: (id) => byId[id],
    createElement: (tag) => new El(tag),
    createTextNode: (text) => { const t = new El("#text"); t.text = text; return t; },
    querySelectorAll: (sel) => { const [root, tag] = sel.split(" "); return byId[root.slice(1)].all().filter((e) => e.tagName === tag); },
    body,
  };
  global.window = { confirm: () => true };
  global.localStorage = { getItem: (k) => (storage.has(k) ? storage.get(k) : null), setItem: (k, v) => storage.set(k, String(v)) };
  global.Blob = class { constructor(parts) { this.content = parts.join(""); } };
  global.URL = { createObjectURL: (blob) => { downloads.push(blob.content); return "blob:1"; }, revokeObjectURL: () => {} };
  global.setTimeout = () => {};
  eval(script(' id="sheet-csv"') + "\n" + script(""));
  return byId;
}
const radios = (root) => root.all().filter((e) => e.tagName === "input" && e.type === "radio");
function choose(root, field, value) {
  const groups = {};
  radios(root).filter((r) => r.name.endsWith("-" + field)).forEach((r) => (groups[r.name] = groups[r.name] || []).push(r));
  Object.values(groups).forEach((group) => { const r = group.find((x) => x.value === value) || group[0];
    if (!r.disabled) { r.checked = true; r.fire("change"); } });
}

const report = {};
let p = page();
report.part2_hidden_at_start = p["part2wrap"].classList.contains("hidden");
report.open2_disabled_at_start = p["open2"].disabled;
choose(p["part1"], "label", answers.label);
report.open2_disabled_when_part1_done = p["open2"].disabled;
p["open2"].click();
report.part2_hidden_after_open = p["part2wrap"].classList.contains("hidden");
report.part1_locked = radios(p["part1"]).every((r) => r.disabled);
choose(p["part2"], "meaning", answers.meaning);
choose(p["part2"], "fluent", answers.fluent);
p["save"].click();
report.progress = p["progress"].textContent;
p = page();  // the page opened again: the answers kept in the browser come back
report.reloaded_part2_open = !p["part2wrap"].classList.contains("hidden");
p["save"].click();
report.downloads = downloads;
process.stdout.write(JSON.stringify(report));
