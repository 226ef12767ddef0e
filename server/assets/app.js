// The varve console: plain DOM, no framework, no network beyond its own
// API. Every value from the store reaches the page as text (textContent),
// never as HTML. The token lives in this tab's sessionStorage and travels
// only in the Authorization header.
"use strict";

const API = "api/v1/";
const tokenKey = "varve-token";
let info = null;      // GET info, once signed in
let stopTail = null;  // ends the live tail of the $all view

// el builds an element: el("td", {class: "num"}, "12", child...).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

const main = () => document.getElementById("main");
function show(...nodes) { main().replaceChildren(...nodes.filter((n) => n !== null && n !== undefined && n !== false)); }
function fail(err) { return el("div", {class: "error", role: "alert"}, err.message || String(err)); }

class APIError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

// api calls the API with the token; it returns the decoded JSON or throws
// an APIError with the server's message.
async function api(path, opts = {}) {
  const headers = {"Authorization": "Bearer " + sessionStorage.getItem(tokenKey)};
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(API + path, {
    method: opts.method || "GET", headers, cache: "no-store",
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  });
  let body = null;
  try { body = await res.json(); } catch (_) { /* not JSON */ }
  if (!res.ok) {
    const e = (body && body.error) || {};
    if (res.status === 401) { sessionStorage.removeItem(tokenKey); }
    throw new APIError(res.status, e.code || "http_" + res.status, e.message || res.statusText);
  }
  return body;
}

const enc = encodeURIComponent;
function when(t) { return t ? new Date(t).toLocaleString(undefined, {dateStyle: "short", timeStyle: "medium"}) : ""; }

// ---- JSON values ------------------------------------------------------------
// Event data may nest 10,000 levels deep and weigh megabytes. These
// functions walk a value with a stack of their own, never by recursion, and
// draw it within budgets, so that no value overflows the call stack or
// freezes the page.
const drawDepth = 40;          // levels drawn at once; deeper ones are folded, drawn on a click
const drawValues = 2000;       // values drawn at once; the rest of a container is counted
const drawString = 10_000;     // characters of one string drawn
const rawChars = 256 << 10;    // characters of raw text shown; Copy takes all
const largeValues = 1000, largeChars = 64 << 10; // over either, a payload is drawn on demand

// large says whether v holds more than largeValues values or largeChars
// characters; it stops counting there.
function large(v) {
  let values = 0, chars = 0;
  const stack = [v];
  while (stack.length) {
    const x = stack.pop();
    if (++values > largeValues) return true;
    if (typeof x === "string") chars += x.length;
    else if (x !== null && typeof x === "object") {
      const keys = Array.isArray(x) ? null : Object.keys(x);
      const n = keys ? keys.length : x.length;
      if (values + stack.length + n > largeValues) return true;
      for (let i = 0; i < n; i++) {
        if (keys) chars += keys[i].length;
        stack.push(keys ? x[keys[i]] : x[i]);
      }
    }
    if (chars > largeChars) return true;
  }
  return false;
}

// compact returns v as compact JSON text, cut after max characters.
function compact(v, max = Infinity) {
  const parts = [];
  let len = 0;
  const put = (s) => { parts.push(s); len += s.length; };
  const stack = [];
  const open = (x) => {
    if (x === null || typeof x !== "object") { put(JSON.stringify(x)); return; }
    const arr = Array.isArray(x);
    put(arr ? "[" : "{");
    stack.push({x, arr, keys: arr ? null : Object.keys(x), i: 0});
  };
  open(v);
  while (stack.length && len <= max) {
    const f = stack[stack.length - 1];
    if (f.i === (f.arr ? f.x.length : f.keys.length)) { put(f.arr ? "]" : "}"); stack.pop(); continue; }
    if (f.i > 0) put(",");
    const k = f.arr ? f.i : f.keys[f.i];
    f.i++;
    if (!f.arr) put(JSON.stringify(k) + ":");
    open(f.x[k]);
  }
  const text = parts.join("");
  return len > max ? {text: text.slice(0, max), cut: true} : {text, cut: false};
}

// pretty draws a JSON value indented, its parts coloured: drawDepth levels
// (a deeper container is a button that draws its own), drawValues values
// (the rest of each open container is counted), drawString characters of
// a string.
function pretty(v, indent = "") {
  const out = [];
  let budget = drawValues;
  const put = (cls, s) => out.push(cls ? el("span", {class: cls}, s) : document.createTextNode(s));
  const stack = [];
  const open = (x, ind, depth) => {
    if (x === null || typeof x === "boolean") return put("j-lit", String(x));
    if (typeof x === "number") return put("j-num", String(x));
    if (typeof x === "string") {
      if (x.length <= drawString) return put("j-str", JSON.stringify(x));
      put("j-str", JSON.stringify(x.slice(0, drawString)).slice(0, -1) + "…");
      return put("j-cut", " (" + (x.length - drawString).toLocaleString("en") + " more characters)");
    }
    const arr = Array.isArray(x);
    const keys = arr ? null : Object.keys(x);
    const n = arr ? x.length : keys.length;
    if (n === 0) return put(null, arr ? "[]" : "{}");
    if (depth >= drawDepth) {
      const fold = el("button", {type: "button", class: "j-fold", title: "nested deeper than " + drawDepth + " levels: draw it",
        onclick: () => fold.replaceWith(...pretty(x, ind))}, (arr ? "[… " : "{… ") + n.toLocaleString("en") + (arr ? " items]" : " keys}"));
      return out.push(fold);
    }
    put(null, arr ? "[" : "{");
    stack.push({x, arr, keys, n, i: 0, ind, depth});
  };
  open(v, indent, 0);
  while (stack.length) {
    const f = stack[stack.length - 1];
    if (f.i === f.n) { put(null, "\n" + f.ind + (f.arr ? "]" : "}")); stack.pop(); continue; }
    const inner = f.ind + "  ";
    put(null, (f.i > 0 ? ",\n" : "\n") + inner);
    if (budget <= 0) {
      put("j-cut", "… " + (f.n - f.i).toLocaleString("en") + (f.arr ? " more items" : " more keys"));
      f.i = f.n;
      continue;
    }
    budget--;
    const k = f.arr ? f.i : f.keys[f.i];
    f.i++;
    if (!f.arr) { put("j-key", JSON.stringify(k)); put(null, ": "); }
    open(f.x[k], inner, f.depth + 1);
  }
  return out;
}

// describe names the shape of a JSON value: "array of 12 items".
function describe(v) {
  if (Array.isArray(v)) return "array of " + v.length.toLocaleString("en") + " items";
  if (typeof v === "string") return "string of " + v.length.toLocaleString("en") + " characters";
  if (v !== null && typeof v === "object") return "object of " + Object.keys(v).length.toLocaleString("en") + " keys";
  return typeof v;
}

// shownChars bounds the base64 text of one payload the console renders.
const shownChars = 64 << 10;

function payload(e, name) {
  if (e[name] !== undefined) {
    const v = e[name];
    if (!large(v)) return el("pre", {class: "mono", "data-part": name}, pretty(v));
    return largePayload(v, name);
  }
  if (e[name + "_base64"] !== undefined) {
    const b64 = e[name + "_base64"];
    const shown = b64.length <= shownChars ? [b64] :
      [b64.slice(0, shownChars), el("span", {class: "muted"}, " … (the first " + shownChars + " of " + b64.length + " characters)")];
    return el("pre", {class: "mono", "data-part": name}, el("span", {class: "muted"}, "base64: "), ...shown);
  }
  return el("pre", {class: "mono muted", "data-part": name}, "(empty)");
}

// largePayload shows a large value's shape and draws the value on demand:
// pretty within the budgets, or as raw text cut at rawChars; Copy puts all
// of its text on the clipboard.
function largePayload(v, name) {
  const pre = el("pre", {class: "mono", "data-part": name}, el("span", {class: "muted"}, describe(v) + ": large, drawn on demand"));
  const copy = el("button", {type: "button", class: "j-copy", onclick: () => {
    navigator.clipboard.writeText(compact(v).text).then(() => { copy.textContent = "Copied"; }, (err) => { copy.textContent = "Copy failed: " + err.message; });
  }}, "Copy");
  return el("div", {class: "payload"},
    el("div", {class: "toolbar j-tools"},
      el("button", {type: "button", class: "j-show", onclick: () => pre.replaceChildren(...pretty(v))}, "Show"),
      el("button", {type: "button", class: "j-raw", onclick: () => {
        const raw = compact(v, rawChars);
        pre.replaceChildren(raw.text, raw.cut ? el("span", {class: "j-cut"}, "\n… cut at " + (rawChars >> 10) + " KiB: Copy takes all of it") : "");
      }}, "Raw"),
      copy),
    pre);
}

// previewChars bounds the data a row of the live view keeps.
const previewChars = 160;

function preview(e) {
  if (e.data !== undefined) {
    const c = compact(e.data, previewChars);
    return c.cut ? c.text + "…" : c.text;
  }
  if (e.data_base64 !== undefined) return "base64:" + e.data_base64.slice(0, previewChars);
  return "";
}

function streamLink(id) { return el("a", {href: "#/stream/" + enc(id)}, id); }
function stateBadge(s) {
  if (s.tombstoned) return el("span", {class: "badge bad"}, "tombstoned");
  if (s.deleted) return el("span", {class: "badge warn"}, "deleted");
  return el("span", {class: "badge ok"}, "live");
}

// ---- sign in -------------------------------------------------------------

function loginView(message) {
  document.title = "Sign in · varve console";
  document.getElementById("nav").hidden = true;
  document.getElementById("logout").hidden = true;
  const input = el("input", {type: "password", id: "token", autocomplete: "off", placeholder: "bearer token", "aria-label": "token"});
  const form = el("form", {class: "login", id: "login", onsubmit: async (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(tokenKey, input.value.trim());
    try { await start(); } catch (err) { loginView(err.status === 401 ? "That token is not the server's." : err.message); }
  }},
    el("h1", {}, "Sign in to the varve console"),
    el("p", {class: "muted"}, "Paste the server's token: the file named by varve serve --token-file, or $VARVE_TOKEN. It stays in this tab only."),
    message ? el("div", {class: "error", role: "alert"}, message) : null,
    input,
    el("button", {class: "primary", type: "submit", id: "signin"}, "Sign in"));
  show(form);
  input.focus();
}

async function start() {
  info = await api("info");
  document.getElementById("nav").hidden = false;
  document.getElementById("logout").hidden = false;
  const store = document.getElementById("store");
  store.replaceChildren(
    el("span", {}, info.name || info.backend),
    el("span", {class: "badge"}, info.backend),
    el("span", {class: info.writes ? "badge warn" : "badge", id: "writes"}, info.writes ? "writes enabled" : "read-only"));
  if (!location.hash || location.hash === "#/") location.hash = "#/dashboard";
  route();
}

// ---- routing ---------------------------------------------------------------

function route() {
  if (stopTail) { stopTail(); stopTail = null; }
  if (!sessionStorage.getItem(tokenKey) || !info) return;
  const [path, query] = location.hash.slice(1).split("?");
  const q = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean);
  const view = parts[0] || "streams";
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.view === view || (a.dataset.view === "streams" && view === "stream") || (a.dataset.view === "log" && ["all", "find", "event"].includes(view)) ||
      (a.dataset.view === "subscriptions" && view === "subscription") || (a.dataset.view === "projections" && view === "projection"));
  }
  const arg = parts.length > 1 ? decodeURIComponent(parts.slice(1).join("/")) : "";
  const titles = {dashboard: "Dashboard", streams: "Streams", stream: "Stream", all: "$all live", log: "$all", find: "Find", event: "Event", projections: "Projections", projection: "Projection", subscriptions: "Subscriptions", subscription: "Subscription", retention: "Retention", erasures: "Erasures", workflows: "Workflows", reports: "Reports"};
  document.title = (arg ? arg + " · " : "") + (titles[view] || "Not found") + " · varve console";
  const views = {dashboard: dashboardView, streams: streamsView, stream: streamView, all: allView, log: logView, find: findView, event: eventView, projections: projectionsView, projection: projectionView, subscriptions: subsView, subscription: subView, retention: retentionView, erasures: erasuresView, workflows: workflowsView, reports: reportsView};
  const fn = views[view];
  if (!fn) { show(fail(new Error("No such page: " + view))); return; }
  fn(arg, q).catch((err) => {
    if (err.status === 401) { loginView("The server refused the token."); return; }
    show(fail(err));
  });
}

// ---- streams ---------------------------------------------------------------

async function streamsView(_, q) {
  const prefix = q.get("prefix") || "", after = q.get("after") || "", system = q.get("system") === "true";
  const params = new URLSearchParams({prefix, limit: "50"});
  if (after) params.set("after", after);
  if (system) params.set("system", "true");
  const page = await api("streams?" + params);
  const input = el("input", {type: "text", id: "prefix", value: prefix, placeholder: "stream id prefix, such as order-", size: 30});
  const sys = el("input", {type: "checkbox", id: "system", checked: system});
  const go = (ev) => {
    if (ev) ev.preventDefault();
    const p = new URLSearchParams({prefix: input.value});
    if (sys.checked) p.set("system", "true");
    location.hash = "#/streams?" + p;
  };
  const rows = page.streams.map((s) => el("tr", {},
    el("td", {class: "mono"}, streamLink(s.stream)),
    el("td", {class: "num"}, s.version),
    el("td", {class: "num mono"}, s.last_position),
    el("td", {}, when(s.updated_at)),
    el("td", {}, stateBadge(s), s.system ? el("span", {class: "badge"}, "system") : null)));
  const next = page.next ? el("a", {href: "#/streams?" + new URLSearchParams({prefix, after: page.next, system: String(system)}), id: "next"}, "Next page →") : null;
  show(
    el("h1", {}, "Streams"),
    el("form", {class: "toolbar", onsubmit: go},
      input, el("label", {}, sys, " system streams"), el("button", {type: "submit", id: "filter"}, "Filter")),
    el("table", {id: "streams"},
      el("thead", {}, el("tr", {}, el("th", {}, "Stream"), el("th", {class: "num"}, "Version"), el("th", {class: "num"}, "Last position"), el("th", {}, "Updated"), el("th", {}, "State"))),
      el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", {colspan: 5, class: "muted"}, "No streams" + (prefix ? " begin with " + JSON.stringify(prefix) : ""))))),
    el("p", {class: "toolbar"}, after ? el("a", {href: "#/streams?" + new URLSearchParams({prefix, system: String(system)})}, "← First page") : null, next));
}

async function streamView(id, q) {
  const dir = q.get("dir") === "forward" ? "forward" : "backward";
  const from = q.get("from") || "";
  const sizes = ["10", "20", "50", "100"];
  const limit = sizes.includes(q.get("limit")) || q.get("limit") === "1" ? q.get("limit") : "20";
  const params = new URLSearchParams({direction: dir, limit});
  if (from) params.set("from", from);
  // A deleted stream reads as not found, a tombstoned one as gone: no events.
  const [s, page] = await Promise.all([api("streams/" + enc(id)), api("streams/" + enc(id) + "/events?" + params)
    .catch((err) => { if (err.status === 404 || err.status === 410) return {events: [], next: null}; throw err; })]);
  const self = (p) => "#/stream/" + enc(id) + "?" + new URLSearchParams({limit, ...p});
  const n = Number(limit);
  const events = page.events.map((e) => el("article", {class: "event", "data-version": e.version},
    el("div", {class: "head"},
      el("span", {class: "mono"}, "v" + e.version),
      el("span", {class: "type"}, e.type),
      el("span", {class: "muted mono"}, "position " + e.position),
      el("span", {class: "muted"}, when(e.recorded_at)),
      el("span", {class: "muted mono"}, e.id),
      el("a", {href: "#/stream/" + enc(id) + "?" + new URLSearchParams({dir: "forward", from: String(e.version), limit: "1"}), class: "permalink", title: "a link to this event"}, "link")),
    payload(e, "data"),
    el("details", {}, el("summary", {}, "metadata"), payload(e, "metadata"))));
  // The page the other way: newer than a page read backward, older than
  // one read forward.
  const versions = page.events.map((e) => e.version);
  let back = null;
  if (versions.length && dir === "backward" && Math.max(...versions) < s.version) back = self({dir, from: String(Math.min(s.version, Math.max(...versions) + n))});
  // A forward page that begins after the version it was asked from met a
  // truncation: the versions below it are gone, nothing is older.
  const truncatedBelow = Math.min(...versions) > (from === "" ? 1 : Number(from));
  if (versions.length && dir === "forward" && Math.min(...versions) > 1 && !truncatedBelow) back = self({dir, from: String(Math.max(1, Math.min(...versions) - n))});
  const jump = el("input", {type: "number", id: "jump-version", min: "1", size: 8, placeholder: "version", "aria-label": "version"});
  const size = el("select", {id: "page-size", "aria-label": "events per page", onchange: () => { location.hash = self({dir, ...(from ? {from} : {}), limit: size.value}); }},
    ...sizes.map((v) => el("option", {value: v, selected: v === limit}, v + " per page")));
  const flash = sessionStorage.getItem("varve-flash");
  sessionStorage.removeItem("varve-flash");
  const nodes = [
    el("h1", {}, "Stream ", el("span", {class: "mono", id: "stream-id"}, s.stream)),
    flash ? el("div", {class: "notice", id: "flash"}, flash) : null,
    el("div", {class: "cards"},
      card("Version", s.version, "version"), card("Last position", s.last_position),
      card("Created", when(s.created_at)), card("Updated", when(s.updated_at)),
      el("div", {class: "card"}, el("div", {class: "k"}, "State"), el("div", {class: "v", id: "card-state"}, stateBadge(s)))),
    el("div", {class: "toolbar"},
      el("a", {href: self({dir: "backward"})}, "Newest first"), "·", el("a", {href: self({dir: "forward"})}, "Oldest first"),
      back ? el("a", {href: back, id: "back"}, dir === "backward" ? "← Newer" : "← Older") : null,
      page.next ? el("a", {href: self({dir, from: page.next}), id: "more"}, dir === "backward" ? "Older →" : "Newer →") : null,
      size,
      el("form", {class: "toolbar", id: "jump", onsubmit: (ev) => { ev.preventDefault(); if (jump.value) location.hash = self({dir: "forward", from: jump.value}); }},
        el("label", {}, "from version ", jump), el("button", {type: "submit"}, "Go"))),
  ];
  if (info.writes && !s.system && !s.tombstoned) nodes.push(appendForm(id, s.version), lifecycleBox(s));
  const none = s.tombstoned ? "The stream is tombstoned: its events are gone for good." :
    s.deleted ? "The stream is deleted: it has no events until an append starts it afresh." : "No events on this page.";
  nodes.push(el("section", {id: "events"}, events.length ? events : el("p", {class: "muted"}, none)));
  show(...nodes);
}

function card(k, v, id) {
  return el("div", {class: "card"}, el("div", {class: "k"}, k), el("div", {class: "v", id: id ? "card-" + id : null}, v === "" ? "–" : v));
}

// appendForm appends one event. Its id is made once per form, so that
// pressing the button again after an unclear failure is an idempotent
// retry, not a second event.
function appendForm(id, version) {
  let eventID = crypto.randomUUID();
  const type = el("input", {type: "text", id: "append-type", placeholder: "EventType"});
  const data = el("textarea", {id: "append-data", placeholder: '{"json": "data"}'});
  const expected = el("input", {type: "text", id: "append-expected", value: String(version), size: 12});
  const out = el("div");
  const form = el("form", {id: "append", onsubmit: async (ev) => {
    ev.preventDefault();
    let value;
    try { value = data.value.trim() === "" ? null : JSON.parse(data.value); } catch (err) { out.replaceChildren(fail(new Error("data is not JSON: " + err.message))); return; }
    try {
      const res = await api("streams/" + enc(id) + "/events", {method: "POST", body: {expected_version: expected.value.trim(), events: [{id: eventID, type: type.value.trim(), data: value}]}});
      eventID = crypto.randomUUID();
      out.replaceChildren(el("div", {class: "notice"}, "Appended version " + res.last_version + " at position " + res.position + "."));
      setTimeout(route, 600);
    } catch (err) { out.replaceChildren(fail(err)); }
  }},
    el("label", {for: "append-type"}, "Type"), type,
    el("label", {for: "append-data"}, "Data (JSON)"), data,
    el("label", {for: "append-expected"}, "Expected version (a number, any, no-stream, stream-exists)"), expected,
    el("p", {}, el("button", {class: "primary", type: "submit", id: "append-submit"}, "Append")), out);
  return el("details", {class: "form", id: "append-box"}, el("summary", {}, "Append an event"), form);
}

// typedConfirm puts into out a form that asks for name, typed, before
// it runs onConfirm: its button stays disabled until the text matches.
function typedConfirm(out, name, question, label, onConfirm) {
  const input = el("input", {type: "text", id: "confirm-name", autocomplete: "off", spellcheck: "false", "aria-label": "type " + name + " to confirm"});
  const go = el("button", {type: "submit", class: "danger", id: "confirm-go", disabled: true}, label);
  input.addEventListener("input", () => { go.disabled = input.value !== name; });
  out.replaceChildren(el("form", {class: "toolbar confirm", id: "confirm", onsubmit: (ev) => { ev.preventDefault(); if (input.value === name) onConfirm(); }},
    el("span", {}, question, " Type ", el("strong", {class: "mono"}, name), " to confirm:"),
    input, go, el("button", {type: "button", id: "confirm-cancel", onclick: () => out.replaceChildren()}, "Cancel")));
  input.focus();
}

// lifecycleBox truncates, deletes or tombstones the stream s, each behind
// its id typed; a deleted stream can only be tombstoned. The page is drawn
// again with a notice of what was done.
function lifecycleBox(s) {
  const out = el("div", {id: "lifecycle-out"});
  const path = "streams/" + enc(s.stream);
  const run = async (req, notice) => {
    try {
      await api(req.path, req.opts);
      sessionStorage.setItem("varve-flash", notice);
      route();
    } catch (err) { out.replaceChildren(fail(err)); }
  };
  // Delete and tombstone expect the version the page shows: a stream
  // written since is refused (409), not deleted unseen.
  const expected = s.deleted ? "any" : String(s.version);
  const del = (tombstone) => {
    const q = new URLSearchParams({expected_version: expected});
    if (tombstone) q.set("tombstone", "true");
    return {path: path + "?" + q, opts: {method: "DELETE"}};
  };
  const before = el("input", {type: "number", id: "truncate-before", min: "1", step: "1", size: 8, placeholder: "version", "aria-label": "first version to keep"});
  const truncate = (ev) => {
    ev.preventDefault();
    const v = Number(before.value);
    if (before.value.trim() === "" || !Number.isInteger(v) || v < 1) { out.replaceChildren(fail(new Error("Give the first version to keep: a whole number from 1."))); return; }
    typedConfirm(out, s.stream, "Remove the events of " + s.stream + " below version " + v + "? It is at version " + s.version + "; the version stays.", "Truncate",
      () => run({path: path + "/truncate", opts: {method: "POST", body: {before: v}}}, "Removed the events below version " + v + "; the stream stays at version " + s.version + "."));
  };
  const tombstone = () => typedConfirm(out, s.stream,
    "Tombstone " + s.stream + "? This is permanent: its events are deleted and its id can never be written again. It cannot be undone.", "Tombstone for good",
    () => run(del(true), "Tombstoned: the stream is deleted for good and can never be written again."));
  const body = s.deleted ? [
    el("p", {class: "muted"}, "The stream is deleted: an append starts it afresh at version 1. Tombstone it to keep its id from ever being written again."),
    el("div", {class: "toolbar"}, el("button", {type: "button", class: "danger", id: "tombstone-start", onclick: tombstone}, "Tombstone…")),
  ] : [
    el("p", {class: "muted"}, "Truncate removes the events below a version (the version stays); delete removes all its events (an append starts it afresh at version 1); tombstone deletes it for good."),
    el("form", {class: "toolbar", id: "truncate", onsubmit: truncate},
      el("label", {}, "Remove the events below version ", before), el("button", {type: "submit", class: "danger", id: "truncate-start"}, "Truncate…")),
    el("div", {class: "toolbar"},
      el("button", {type: "button", class: "danger", id: "delete-start", onclick: () => typedConfirm(out, s.stream,
        "Delete the events of " + s.stream + ", at version " + s.version + "? An append starts it afresh at version 1.", "Delete",
        () => run(del(false), "Deleted: its events are gone; an append starts it afresh at version 1."))}, "Delete…"),
      el("button", {type: "button", class: "danger", id: "tombstone-start", onclick: tombstone}, "Tombstone…")),
  ];
  return el("details", {class: "form lifecycle", id: "lifecycle-box"}, el("summary", {}, "Stream lifecycle"), ...body, out);
}

// ---- $all, live --------------------------------------------------------------

async function allView(_, q) {
  const from = q.get("after") || "end";
  // The filter of the tail: the library's (categories, types, stream
  // prefixes), comma-separated, as the API takes them.
  const filter = {};
  for (const k of ["category", "type", "stream_prefix"]) if (q.get(k)) filter[k] = q.get(k);
  const body = el("tbody", {id: "tail-rows"});
  const empty = el("tr", {id: "tail-empty"}, el("td", {colspan: 6, class: "muted"}, "Waiting for events" + (Object.keys(filter).length ? " that match the filter" : "") + "…"));
  body.append(empty);
  const count = el("span", {id: "tail-count"}, "0");
  const status = el("span", {class: "badge", id: "tail-status"}, "connecting");
  // The view keeps the newest max rows, each with at most previewChars of
  // its data: a bounded page however long it follows and however big the
  // events are. Paused, it keeps following and holds the newest max events
  // back until it resumes.
  const max = 500;
  let n = 0, paused = false, held = [];
  const row = (e) => {
    const p = preview(e);
    return el("tr", {class: "fresh", "data-position": e.position},
      el("td", {class: "num mono"}, e.position),
      el("td", {class: "mono"}, streamLink(e.stream)),
      el("td", {class: "num"}, e.version),
      el("td", {}, e.type),
      el("td", {}, when(e.recorded_at)),
      el("td", {class: "mono preview", title: p}, p));
  };
  const display = (e) => {
    empty.remove();
    body.prepend(row(e));
    while (body.rows.length > max) body.deleteRow(body.rows.length - 1);
  };
  const add = (e) => {
    n++;
    count.textContent = String(n);
    if (!paused) { display(e); return; }
    held.push(e);
    if (held.length > max) held.shift();
    pause.textContent = "Resume (" + held.length + " held)";
  };
  const pause = el("button", {type: "button", id: "tail-pause", onclick: () => {
    paused = !paused;
    if (!paused) { held.forEach(display); held = []; }
    pause.textContent = paused ? "Resume (0 held)" : "Pause";
  }}, "Pause");
  const input = el("input", {type: "text", id: "tail-from", value: from, size: 10});
  const fields = {};
  for (const [k, label] of [["category", "category"], ["type", "type"], ["stream_prefix", "stream prefix"]]) {
    fields[k] = el("input", {type: "text", id: "tail-" + k, value: filter[k] || "", size: 12, placeholder: "any", "aria-label": label});
  }
  show(
    el("h1", {}, "$all, live"),
    el("form", {class: "toolbar", onsubmit: (ev) => {
      ev.preventDefault();
      const p = new URLSearchParams({after: input.value.trim() || "end"});
      for (const [k, f] of Object.entries(fields)) if (f.value.trim()) p.set(k, f.value.trim());
      location.hash = "#/all?" + p;
    }},
      status, el("span", {}, count, " events"), pause,
      el("label", {}, "after ", input),
      el("label", {}, "category ", fields.category), el("label", {}, "type ", fields.type), el("label", {}, "stream prefix ", fields.stream_prefix),
      el("button", {type: "submit", id: "tail-follow"}, "Follow"),
      el("span", {class: "muted"}, "(end: new events only; start: the whole log; lists comma-separated; the newest " + max + " are kept)")),
    el("table", {id: "tail"},
      el("thead", {}, el("tr", {}, el("th", {class: "num"}, "Position"), el("th", {}, "Stream"), el("th", {class: "num"}, "Version"), el("th", {}, "Type"), el("th", {}, "Recorded"), el("th", {}, "Data"))),
      body));
  const ctl = new AbortController();
  stopTail = () => ctl.abort();
  follow(from, filter, ctl.signal, {
    start: () => { status.textContent = "live"; status.className = "badge live"; },
    event: add,
    error: (msg) => { status.textContent = "stopped"; status.className = "badge bad"; main().prepend(el("div", {class: "error", role: "alert"}, msg)); },
  });
}

// follow reads the server-sent events of the live tail with fetch, which,
// unlike EventSource, can send the Authorization header. It reconnects
// after a dropped connection from the last position it saw.
async function follow(after, filter, signal, on) {
  let last = after;
  for (let attempt = 0; !signal.aborted; attempt++) {
    try {
      const res = await fetch(API + "all/tail?" + new URLSearchParams({after: last, ...filter}), {headers: {"Authorization": "Bearer " + sessionStorage.getItem(tokenKey)}, signal, cache: "no-store"});
      if (!res.ok) {
        let msg = res.statusText;
        try { msg = (await res.json()).error.message; } catch (_) { /* keep statusText */ }
        on.error(msg);
        return;
      }
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        buf += value;
        let cut;
        while ((cut = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          let type = "message", data = "", id = null;
          for (const line of block.split("\n")) {
            if (line.startsWith("event: ")) type = line.slice(7);
            else if (line.startsWith("data: ")) data += line.slice(6);
            else if (line.startsWith("id: ")) id = line.slice(4);
          }
          if (type === "start") { on.start(); attempt = 0; }
          else if (type === "event") { on.event(JSON.parse(data)); if (id) last = id; }
          else if (type === "error") { on.error(JSON.parse(data).message); return; }
        }
      }
    } catch (err) {
      if (signal.aborted) return;
    }
    await new Promise((r) => setTimeout(r, Math.min(5000, 500 * (attempt + 1))));
  }
}

// ---- $all, browsed; finding events; an event -------------------------------------

// filterFields are the inputs of the library's filter, filled from q.
function filterFields(q, prefix) {
  const fields = {};
  for (const [k, label] of [["category", "category"], ["type", "type"], ["stream_prefix", "stream prefix"]]) {
    fields[k] = el("input", {type: "text", id: prefix + k, value: q.get(k) || "", size: 12, placeholder: "any", "aria-label": label});
  }
  return fields;
}

function eventLink(e, text) { return el("a", {href: "#/event/" + enc(e.stream) + "/" + e.version, class: "mono"}, text); }

function eventRow(e) {
  const p = preview(e);
  return el("tr", {"data-position": e.position},
    el("td", {class: "num mono"}, eventLink(e, e.position)),
    el("td", {class: "mono"}, streamLink(e.stream)),
    el("td", {class: "num"}, e.version),
    el("td", {}, e.type),
    el("td", {}, when(e.recorded_at)),
    el("td", {class: "mono preview", title: p}, p));
}

function eventTable(id, events, empty) {
  return el("table", {id},
    el("thead", {}, el("tr", {}, el("th", {class: "num"}, "Position"), el("th", {}, "Stream"), el("th", {class: "num"}, "Version"), el("th", {}, "Type"), el("th", {}, "Recorded"), el("th", {}, "Data"))),
    el("tbody", {}, events.length ? events.map(eventRow) : el("tr", {}, el("td", {colspan: 6, class: "muted"}, empty))));
}

// findForm looks an event up by id, or events by correlation id.
function findForm(value) {
  const input = el("input", {type: "text", id: "find-value", value: value || "", size: 38, placeholder: "event id or correlation id", "aria-label": "event id or correlation id"});
  return el("form", {class: "toolbar", id: "find", onsubmit: (ev) => {
    ev.preventDefault();
    const v = input.value.trim();
    if (!v) return;
    const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(v);
    location.hash = "#/find?" + new URLSearchParams(uuid ? {id: v} : {correlation_id: v});
  }}, input, el("button", {type: "submit", id: "find-submit"}, "Find"));
}

// logView pages through $all with the library's filter, newest first: a
// page backward from the end or before a position, or forward after one
// (shown newest first too).
async function logView(_, q) {
  const sizes = ["20", "50", "100", "500"];
  const limit = sizes.includes(q.get("limit")) ? q.get("limit") : "50";
  const filter = {};
  for (const k of ["category", "type", "stream_prefix"]) if (q.get(k)) filter[k] = q.get(k);
  const forward = q.has("after");
  const params = new URLSearchParams({limit, ...filter});
  if (forward) params.set("after", q.get("after")); else { params.set("direction", "backward"); if (q.get("before")) params.set("before", q.get("before")); }
  const page = await api("all?" + params);
  const events = forward ? page.events.slice().reverse() : page.events;
  const self = (p) => "#/log?" + new URLSearchParams({limit, ...filter, ...p});
  const newest = events.length ? events[0].position : null, oldest = events.length ? events[events.length - 1].position : null;
  // Newer: forward after the newest shown, unless this page is the head.
  const atHead = forward ? page.end : !q.get("before");
  const newer = !atHead && newest ? self({after: newest}) : null;
  // Older: backward before the oldest shown, unless this page reached the start.
  const atStart = forward ? false : page.end;
  const older = !atStart && oldest ? self({before: oldest}) : null;
  const fields = filterFields(q, "log-");
  const size = el("select", {id: "log-size", "aria-label": "events per page", onchange: () => { location.hash = self({...(forward ? {after: q.get("after")} : (q.get("before") ? {before: q.get("before")} : {})), limit: size.value}); }},
    ...sizes.map((v) => el("option", {value: v, selected: v === limit}, v + " per page")));
  show(
    el("h1", {}, "$all"),
    findForm(""),
    el("form", {class: "toolbar", id: "log-filter", onsubmit: (ev) => {
      ev.preventDefault();
      const p = new URLSearchParams({limit});
      for (const [k, f] of Object.entries(fields)) if (f.value.trim()) p.set(k, f.value.trim());
      location.hash = "#/log?" + p;
    }},
      el("label", {}, "category ", fields.category), el("label", {}, "type ", fields.type), el("label", {}, "stream prefix ", fields.stream_prefix),
      el("button", {type: "submit", id: "log-apply"}, "Filter"), size,
      el("a", {href: "#/all?" + new URLSearchParams(filter), id: "log-live"}, "Follow live →")),
    el("div", {class: "toolbar"},
      el("a", {href: self({}), id: "log-newest"}, "Newest"),
      newer ? el("a", {href: newer, id: "log-newer"}, "← Newer") : null,
      older ? el("a", {href: older, id: "log-older"}, "Older →") : null,
      el("span", {class: "muted"}, events.length ? "positions " + oldest + " to " + newest : "")),
    eventTable("log", events, "No events" + (Object.keys(filter).length ? " match the filter" : "") + " here."));
}

// findView shows the events a search of $all found, newest first, and
// goes on with an older part of the log.
async function findView(_, q) {
  const params = new URLSearchParams();
  for (const k of ["id", "correlation_id", "before", "scan"]) if (q.get(k)) params.set(k, q.get(k));
  const what = q.get("id") ? "event id " + q.get("id") : "correlation id " + q.get("correlation_id");
  const res = await api("events?" + params);
  const on = new URLSearchParams(params);
  on.set("before", res.next || "");
  show(
    el("h1", {}, "Find"),
    findForm(q.get("id") || q.get("correlation_id")),
    el("p", {class: "muted", id: "find-summary"}, "Events with " + what + (q.get("before") ? " before position " + q.get("before") : "") + ": " + res.events.length +
      " found in " + res.scanned.toLocaleString("en") + " events read newest first" + (res.end ? ", down to the start of $all." : ".")),
    eventTable("found", res.events, "None found."),
    res.end ? null : el("p", {class: "toolbar"}, el("a", {href: "#/find?" + on, id: "find-more"}, "Search older events →")));
}

// eventView is an event's page: its permalink is #/event/<stream>/<version>.
async function eventView(arg) {
  const i = arg.lastIndexOf("/");
  const stream = arg.slice(0, i), version = arg.slice(i + 1);
  if (i < 1 || !/^[1-9][0-9]*$/.test(version)) throw new Error("An event's page is #/event/<stream>/<version>.");
  const page = await api("streams/" + enc(stream) + "/events?" + new URLSearchParams({direction: "forward", from: version, limit: "1"}));
  const e = page.events[0];
  if (!e || String(e.version) !== version) throw new Error("Stream " + stream + " has no event at version " + version + " (truncated, deleted, or not written yet).");
  document.title = e.type + " · " + stream + " v" + version + " · varve console";
  const copy = el("button", {type: "button", id: "event-copy", onclick: () => {
    navigator.clipboard.writeText(JSON.stringify(e, null, 2)).then(() => { copy.textContent = "Copied"; }, (err) => { copy.textContent = "Copy failed: " + err.message; });
  }}, "Copy raw JSON");
  show(
    el("h1", {}, "Event ", el("span", {class: "mono", id: "event-title"}, e.type)),
    el("div", {class: "cards"},
      card("Stream", streamLink(e.stream)), card("Version", e.version, "event-version"), card("Position", e.position, "event-position"),
      card("Recorded", when(e.recorded_at)), card("Id", e.id, "event-id")),
    el("div", {class: "toolbar"}, copy,
      el("a", {href: "#/stream/" + enc(stream) + "?" + new URLSearchParams({dir: "forward", from: version})}, "In its stream"),
      el("a", {href: "#/log?" + new URLSearchParams({before: e.position})}, "Older in $all"),
      el("a", {href: "#/log?" + new URLSearchParams({after: e.position})}, "Newer in $all")),
    el("article", {class: "event", id: "event"},
      el("div", {class: "head"}, el("span", {}, "data")), payload(e, "data"),
      el("div", {class: "head"}, el("span", {}, "metadata")), payload(e, "metadata")));
}

// runBadge says whether a consumer runs, by its heartbeats: running (in
// how many processes), stopped since it was last seen running, stopped,
// never seen, or unknown on a store without leases.
function runBadge(running, seen, lastSeen) {
  if (running === null || running === undefined) return el("span", {class: "badge", title: "the store keeps no leases: whether it runs is unknown"}, "unknown");
  if (running > 0) return el("span", {class: "badge ok"}, running === 1 ? "running" : "running ×" + running);
  if (lastSeen) return el("span", {class: "badge warn", title: "its heartbeats were last recorded then"}, "stopped since " + when(lastSeen));
  return seen === false ? el("span", {class: "badge"}, "never seen") : el("span", {class: "badge warn"}, "stopped");
}

// ---- projections -----------------------------------------------------------------

const projState = {"live": "ok", "catching-up": "warn", "rebuilding": "warn", "paused": "warn", "failed": "bad"};
function projBadge(state) { return el("span", {class: "badge " + (projState[state] || "")}, state); }
function lagText(v) { return v.checkpoint === null ? "–" : (v.lag_more ? "more than " + v.lag : String(v.lag)); }
// ago says how long ago t was: "12 s", "3 min", "2 h", "4 d".
function ago(t) {
  const s = Math.max(0, (Date.now() - new Date(t).getTime()) / 1000);
  if (s < 120) return Math.round(s) + " s";
  if (s < 7200) return Math.round(s / 60) + " min";
  return s < 172800 ? Math.round(s / 3600) + " h" : Math.round(s / 86400) + " d";
}

async function projectionsView() {
  const res = await api("projections");
  const rows = res.projections.map((p) => {
    const cur = p.versions.find((v) => v.current) || p.versions[p.versions.length - 1];
    return el("tr", {"data-name": p.name},
      el("td", {class: "mono"}, el("a", {href: "#/projection/" + enc(p.name)}, p.name)),
      el("td", {class: "num"}, p.current || "none"),
      el("td", {class: "num"}, p.versions.length),
      el("td", {}, p.paused ? projBadge("paused") : (cur ? projBadge(cur.state) : "")),
      el("td", {class: "num"}, cur ? lagText(cur) : "–"),
      el("td", {class: "num"}, p.parked ? el("span", {class: "badge bad"}, p.parked + " parked") : "0"));
  });
  show(
    el("h1", {}, "Projections"),
    el("p", {class: "muted"}, "Read models kept by package projection: each with its versions, the one served (current), its state and lag as the store records them."),
    res.truncated ? el("div", {class: "notice"}, "More projections than the server lists at once: the first 200 by name.") : null,
    el("table", {id: "projections"},
      el("thead", {}, el("tr", {}, el("th", {}, "Name"), el("th", {class: "num"}, "Current"), el("th", {class: "num"}, "Versions"), el("th", {}, "State"), el("th", {class: "num"}, "Lag (events)"), el("th", {class: "num"}, "Parked"))),
      el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", {colspan: 6, class: "muted"}, "No projections in this store.")))));
}

async function projectionView(name) {
  const p = await api("projections/" + enc(name));
  const out = el("div", {id: "proj-result"});
  // act asks for the projection's name, typed, before a request that
  // changes what is served or rebuilt, as the CLI does.
  const act = async (what, version, typed) => {
    if (typed) {
      const input = el("input", {type: "text", id: "confirm-name", autocomplete: "off", "aria-label": "projection name"});
      const go = el("button", {type: "submit", class: "danger", id: "confirm-go", disabled: true}, what === "promote" ? "Make current" : "Rebuild");
      input.addEventListener("input", () => { go.disabled = input.value !== p.name; });
      out.replaceChildren(el("form", {class: "form toolbar", id: "confirm", onsubmit: (ev) => { ev.preventDefault(); if (input.value === p.name) act(what, version, false); }},
        el("span", {}, (what === "promote" ? "Make version " + version + " current" : "Rebuild version " + version + " in place (its Reset empties the read model)") + ": type ", el("strong", {class: "mono"}, p.name), " to confirm"),
        input, go));
      input.focus();
      return;
    }
    try {
      const r = await api("projections/" + enc(p.name) + "/" + what, {method: "POST", body: version ? {version} : {}});
      sessionStorage.setItem("varve-flash", r.requested[0].toUpperCase() + r.requested.slice(1) + (r.version ? " of version " + r.version : "") + " requested.");
      route();
    } catch (err) { out.replaceChildren(fail(err)); }
  };
  const writes = info.writes;
  const rows = p.versions.map((v) => el("tr", {"data-version": v.version},
    el("td", {class: "num"}, v.version, v.current ? " " : null, v.current ? el("span", {class: "badge ok"}, "current") : null),
    el("td", {}, runBadge(v.running, undefined, v.last_seen), " ", projBadge(v.state), v.rebuild_pending ? el("span", {class: "badge warn"}, "rebuild pending") : null, v.replay_pending ? el("span", {class: "badge warn"}, "replay pending") : null),
    el("td", {class: "num mono"}, v.checkpoint === null ? "none" : v.checkpoint),
    el("td", {class: "num mono"}, v.origin === null ? "–" : v.origin),
    el("td", {class: "num"}, lagText(v)),
    el("td", {class: "num", title: v.pending_since ? "the oldest event it has yet to handle was recorded at " + when(v.pending_since) : null}, v.pending_since ? ago(v.pending_since) : "–"),
    el("td", {class: "num"}, v.parked ? el("a", {href: "#/subscription/" + enc("projection-" + p.name + "-v" + v.version)}, v.parked + " parked") : "0"),
    el("td", {}, writes ? [
      v.current ? null : el("button", {class: "primary", "data-act": "promote", onclick: () => act("promote", v.version, true)}, "Make current"),
      el("button", {class: "danger", "data-act": "rebuild", onclick: () => act("rebuild", v.version, true)}, "Rebuild"),
    ] : null)));
  const flash = sessionStorage.getItem("varve-flash");
  sessionStorage.removeItem("varve-flash");
  show(
    el("h1", {}, "Projection ", el("span", {class: "mono"}, p.name)),
    flash ? el("div", {class: "notice", id: "flash"}, flash) : null,
    p.failure ? el("div", {class: "error", id: "failure"}, "Version " + p.failure.version + " failed " + when(p.failure.at) + ": " + p.failure.error) : null,
    el("div", {class: "cards"},
      card("Current version", p.current || "none", "current"),
      card("State", p.paused ? "paused" : "running as recorded", "paused"),
      card("$all ends at", p.head),
      card("Parked", p.parked, "parked")),
    writes ? el("div", {class: "toolbar"},
      p.paused ? el("button", {class: "primary", id: "resume", onclick: () => act("resume")}, "Resume")
        : el("button", {id: "pause", onclick: () => act("pause")}, "Pause")) : null,
    out,
    el("h2", {}, "Versions"),
    el("table", {id: "versions"},
      el("thead", {}, el("tr", {}, el("th", {class: "num"}, "Version"), el("th", {}, "State"), el("th", {class: "num"}, "Checkpoint"), el("th", {class: "num"}, "Origin"), el("th", {class: "num"}, "Lag (events)"), el("th", {class: "num"}, "Lag (time)"), el("th", {class: "num"}, "Parked"), el("th", {}, ""))),
      el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", {colspan: 7, class: "muted"}, "No version has a checkpoint yet.")))),
    el("p", {class: "muted"}, "Runners follow pause, resume and rebuild within their control poll (a second by default); a version runs while a runner's heartbeat lasts."));
}

// ---- subscriptions ---------------------------------------------------------------

async function subsView() {
  const res = await api("subscriptions");
  const lag = (s) => s.checkpoint === null ? "–" : (s.lag_more ? "more than " + res.lag_limit : String(s.lag));
  const rows = res.subscriptions.map((s) => el("tr", {"data-name": s.name},
    el("td", {class: "mono"}, el("a", {href: "#/subscription/" + enc(s.name)}, s.name)),
    el("td", {class: "num mono"}, s.checkpoint === null ? "none" : s.checkpoint),
    el("td", {class: "num"}, lag(s)),
    el("td", {}, runBadge(s.running, s.seen, s.last_seen), " ", s.checkpoint === null ? el("span", {class: "badge"}, "no checkpoint") :
      s.caught_up ? el("span", {class: "badge ok"}, "caught up") : el("span", {class: "badge warn"}, "behind")),
    el("td", {class: "num"}, s.parked ? el("span", {class: "badge bad"}, s.parked + " parked") : "0")));
  show(
    el("h1", {}, "Subscriptions"),
    el("p", {class: "muted"}, "Consumers the store knows of: checkpoints, and delivery subscriptions that parked events. $all ends at position ",
      el("span", {class: "mono", id: "last-position"}, res.last_position), ". A consumer runs while its heartbeat (a lease renewed every 2 s by default) lasts."),
    el("table", {id: "subscriptions"},
      el("thead", {}, el("tr", {}, el("th", {}, "Name"), el("th", {class: "num"}, "Checkpoint"), el("th", {class: "num"}, "Lag (events)"), el("th", {}, "State"), el("th", {class: "num"}, "Parked"))),
      el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", {colspan: 5, class: "muted"}, "No checkpoints and no parked events in this store.")))));
}

async function subView(name) {
  const res = await api("subscriptions/" + enc(name));
  const s = res.subscription;
  const out = el("div", {id: "sub-result"});
  const selected = new Set();
  const act = async (what) => {
    const positions = [...selected];
    if (positions.length === 0) { out.replaceChildren(fail(new Error("Select parked events first."))); return; }
    try {
      const r = await api("subscriptions/" + enc(name) + "/parked/" + what, {method: "POST", body: {positions}});
      if (what === "replay" && r.request !== undefined) {
        sessionStorage.setItem("varve-flash", "Replay requested (request " + r.request + "): the projection's runner applies the selected events again within its control poll.");
        route();
        return;
      }
      const n = what === "replay" ? r.replayed.length : r.skipped.length;
      const failed = what === "replay" && r.failed.length ? " " + r.failed.length + " failed: " + r.failed[0].error : "";
      sessionStorage.setItem("varve-flash", (what === "replay" ? "Replayed " : "Skipped ") + n + " parked event" + (n === 1 ? "" : "s") + "." + failed);
      route();
    } catch (err) { out.replaceChildren(fail(err)); }
  };
  const rows = res.parked_events.map((p) => el("tr", {"data-position": p.position},
    el("td", {}, el("input", {type: "checkbox", "aria-label": "select " + p.position, onchange: (ev) => ev.target.checked ? selected.add(p.position) : selected.delete(p.position)})),
    el("td", {class: "num mono"}, p.position),
    el("td", {class: "mono"}, streamLink(p.stream)),
    el("td", {class: "num"}, p.version),
    el("td", {}, p.type),
    el("td", {class: "num"}, p.attempts),
    el("td", {}, p.reason),
    el("td", {class: "mono"}, p.error || ""),
    el("td", {}, when(p.parked_at))));
  const flash = sessionStorage.getItem("varve-flash");
  sessionStorage.removeItem("varve-flash");
  const nodes = [
    el("h1", {}, "Subscription ", el("span", {class: "mono"}, s.name)),
    flash ? el("div", {class: "notice", id: "flash"}, flash) : null,
    el("div", {class: "cards"},
      card("Checkpoint", s.checkpoint === null ? "none" : s.checkpoint, "checkpoint"),
      card("$all ends at", res.last_position),
      card("Lag (events)", s.checkpoint === null ? "–" : (s.lag_more ? "> " + res.lag_limit : s.lag), "lag"),
      card("Parked", s.parked, "parked")),
  ];
  if (info.writes && s.checkpoint !== null) nodes.push(resetForm(name, s.checkpoint));
  nodes.push(el("h2", {}, "Parked events"));
  if (rows.length) {
    const canReplay = info.writes && (info.replay || res.replay_by_runner);
    nodes.push(el("div", {class: "toolbar"},
      el("button", {class: "primary", id: "replay", disabled: !canReplay, title: canReplay ? null : (info.writes ? "the server has no replay sink for this subscription" : "writes are disabled"), onclick: () => act("replay")}, "Replay selected"),
      el("button", {class: "danger", id: "skip", disabled: !info.writes, onclick: () => { if (confirm("Drop the selected parked events without delivering them?")) act("skip"); }}, "Skip selected")));
  }
  nodes.push(out, el("table", {id: "parked"},
    el("thead", {}, el("tr", {}, el("th", {}, ""), el("th", {class: "num"}, "Position"), el("th", {}, "Stream"), el("th", {class: "num"}, "Version"), el("th", {}, "Type"), el("th", {class: "num"}, "Attempts"), el("th", {}, "Reason"), el("th", {}, "Error"), el("th", {}, "Parked"))),
    el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", {colspan: 9, class: "muted"}, "Nothing is parked.")))));
  show(...nodes);
}

function resetForm(name, current) {
  const to = el("input", {type: "text", id: "reset-to", placeholder: "start, end or a position", size: 22});
  const out = el("div");
  return el("form", {class: "form toolbar", id: "reset", onsubmit: async (ev) => {
    ev.preventDefault();
    if (!confirm("Move the checkpoint of " + name + " from " + current + " to " + to.value + "? Stop the consumer first: a running one saves its own position over it.")) return;
    try {
      const r = await api("subscriptions/" + enc(name) + "/reset", {method: "POST", body: {to: to.value.trim()}});
      sessionStorage.setItem("varve-flash", "Checkpoint moved to " + r.to + ".");
      route();
    } catch (err) { out.replaceChildren(fail(err)); }
  }}, el("strong", {}, "Move the checkpoint to"), to, el("button", {type: "submit", class: "danger"}, "Reset"), out);
}

// ---- dashboard -------------------------------------------------------------------
// The server samples the store (GET dashboard); the page keeps the newest
// max_samples it was sent, fetches only newer ones every interval, and
// draws them as inline SVG. Every viewer sees the same samples.

const svgNS = "http://www.w3.org/2000/svg";
function svgEl(tag, attrs) {
  const e = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) e.setAttribute(k, String(v));
  return e;
}

function rate(v) { return v === null || v === undefined ? "–" : (v < 10 ? v.toFixed(1) : Math.round(v).toLocaleString("en")); }
function size(n) {
  if (n === null || n === undefined) return "unknown";
  const units = ["bytes", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? String(n) : n.toFixed(1)) + " " + units[i];
}
function millis(us) { return us === null || us === undefined ? "–" : (us / 1000).toFixed(us < 10_000 ? 2 : 0); }
function clock(t) { return new Date(t).toLocaleTimeString(undefined, {timeStyle: "medium"}); }

// lineChart draws series ({name, points: [[time in ms, value or null]],
// dashed}) over [t0, t1] from 0 to their largest value, with a legend; a
// null value breaks a line, and a point alone between breaks is a dot.
// fmt writes a value for the axis.
function lineChart(id, series, t0, t1, fmt) {
  const w = 600, h = 150;
  let top = 0;
  for (const s of series) for (const [, v] of s.points) if (v !== null && v > top) top = v;
  const scale = top > 0 ? top * 1.1 : 1;
  const x = (t) => (t1 > t0 ? (t - t0) / (t1 - t0) * w : w).toFixed(1);
  const y = (v) => (h - v / scale * h).toFixed(1);
  const plot = svgEl("svg", {viewBox: `0 0 ${w} ${h}`, preserveAspectRatio: "none", class: "plot", "aria-hidden": "true"});
  for (const f of [0.25, 0.5, 0.75]) plot.append(svgEl("line", {x1: 0, x2: w, y1: h * f, y2: h * f, class: "grid"}));
  series.forEach((s, i) => {
    let d = "", dots = "", run = [], n = 0;
    const end = () => {
      if (run.length === 1) dots += "M" + run[0] + " h0.01 ";
      else if (run.length > 1) d += "M" + run.join(" L") + " ";
      run = [];
    };
    for (const [t, v] of s.points) {
      if (v === null || v === undefined) { end(); continue; }
      run.push(x(t) + " " + y(v));
      n++;
    }
    end();
    const cls = "line s" + (i % 8) + (s.dashed ? " dashed" : "");
    if (d) plot.append(svgEl("path", {d, class: cls, "data-series": s.name, "data-points": n}));
    if (dots) plot.append(svgEl("path", {d: dots, class: cls + " dot", "data-series": s.name, "data-points": d ? null : n}));
  });
  return el("figure", {class: "chart", id},
    el("div", {class: "axis muted"}, el("span", {}, "max " + fmt(top))),
    plot,
    el("div", {class: "axis muted"}, el("span", {}, clock(t0)), el("span", {}, clock(t1))),
    el("figcaption", {class: "legend"}, series.map((s, i) => el("span", {}, el("i", {class: "sw s" + (i % 8) + (s.dashed ? " dashed" : "")}), s.name))));
}

async function dashboardView() {
  let since = null, res = null, timer = null, stopped = false;
  let samples = [];
  stopTail = () => { stopped = true; clearTimeout(timer); };
  const status = el("span", {class: "badge", id: "dash-status"}, "starting");
  const note = el("p", {class: "muted", id: "dash-note"});
  const errors = el("div", {id: "dash-errors"});
  const cards = el("div", {class: "cards", id: "dash-cards"});
  const charts = el("div", {class: "charts", id: "dash-charts"});
  const consumers = el("div", {id: "dash-consumers"});
  show(el("h1", {}, "Dashboard ", status), note, errors, cards, charts, consumers);

  const draw = () => {
    status.textContent = res.sampling ? "live" : "not sampling";
    status.className = res.sampling ? "badge live" : "badge warn";
    note.textContent = "Sampled by the server every " + (res.interval_ms / 1000) + " s, the last " + Math.round(res.window_ms / 60000) +
      " minutes, the same for every viewer. Events per second are read from $all: what every writer appended. " +
      (res.measured ? "Appends, reads and latency are those of the calls made through this server's store." : "This server does not measure its own appends and reads (no Meter).");
    const last = samples[samples.length - 1];
    if (!last) {
      cards.replaceChildren(el("p", {class: "muted", id: "dash-waiting"}, "Waiting for the first sample…"));
      return;
    }
    const own = last.through_server;
    cards.replaceChildren(
      card("$all head", last.head === null ? "–" : last.head, "head"),
      card("Events/s, every writer", last.events_per_sec === null ? "–" : rate(last.events_per_sec) + (last.events_at_least ? " or more" : ""), "events"),
      card("Appends/s through this server", res.measured ? (own ? rate(own.appends_per_sec) : "–") : "not measured", "appends"),
      card("Read pages/s, this server", res.measured ? (own ? rate(own.read_pages_per_sec) : "–") : "not measured", "reads"),
      card("Append p50 / p99, this server", res.measured ? (own && own.append_p50_us !== null ? millis(own.append_p50_us) + " / " + millis(own.append_p99_us) + " ms" : "–") : "not measured", "latency"),
      card("Store size", size(last.size_bytes), "size"));
    const t0 = Date.parse(samples[0].time), t1 = Date.parse(last.time);
    const points = (f) => samples.map((s) => [Date.parse(s.time), f(s)]);
    const perSec = (v) => rate(v) + "/s";
    const events = [{name: "$all, every writer", points: points((s) => s.events_per_sec)}];
    if (res.measured) events.push({name: "through this server", dashed: true, points: points((s) => s.through_server ? s.through_server.events_per_sec : null)});
    const names = [...new Set(samples.flatMap((s) => s.consumers.map((c) => c.name)))].sort();
    const of = (s, name) => s.consumers.find((c) => c.name === name);
    const lag = names.map((n) => ({name: n, points: points((s) => { const c = of(s, n); return c && c.checkpoint !== null ? c.lag : null; })}));
    const age = names.map((n) => ({name: n, points: points((s) => { const c = of(s, n); return c && c.checkpoint !== null ? (c.oldest_unprocessed_ms === null ? 0 : c.oldest_unprocessed_ms / 1000) : null; })}));
    const section = (title, body) => el("section", {}, el("h2", {}, title), body);
    charts.replaceChildren(
      section("Events appended per second", lineChart("chart-events", events, t0, t1, perSec)),
      section("Append latency through this server (ms)", res.measured ?
        lineChart("chart-latency", ["p50", "p99"].map((p) => ({name: p, points: points((s) => s.through_server && s.through_server["append_" + p + "_us"] !== null ? s.through_server["append_" + p + "_us"] / 1000 : null)})), t0, t1, (v) => v.toFixed(2) + " ms") :
        el("p", {class: "muted"}, "Not measured: varve serve measures it; a server of your own passes a Meter (server.Config.Meter) that is also the store's Tracer.")),
      section("Consumer lag (events)", names.length ? lineChart("chart-lag", lag, t0, t1, (v) => Math.round(v).toLocaleString("en")) :
        el("p", {class: "muted"}, "No consumers: a subscription, delivery or projection shows here once it has a checkpoint.")),
      section("Oldest unprocessed event (s)", names.length ? lineChart("chart-age", age, t0, t1, (v) => v.toFixed(1) + " s") : el("p", {class: "muted"}, "–")));
    const rows = last.consumers.map((c) => el("tr", {"data-name": c.name},
      el("td", {class: "mono"}, el("a", {href: "#/subscription/" + enc(c.name)}, c.name)),
      el("td", {class: "num mono"}, c.checkpoint === null ? "none" : c.checkpoint),
      el("td", {class: "num"}, c.checkpoint === null ? "–" : (c.lag_more ? "more than " + c.lag : String(c.lag))),
      el("td", {class: "num"}, c.oldest_unprocessed_ms === null ? "–" : (c.oldest_unprocessed_ms / 1000).toFixed(1) + " s"),
      el("td", {}, runBadge(c.running, c.seen))));
    consumers.replaceChildren(
      last.consumers_truncated ? el("div", {class: "notice"}, "More consumers than the dashboard tracks: the first " + res.max_consumers + " by name.") : "",
      rows.length ? el("table", {id: "dash-consumer-table"},
        el("thead", {}, el("tr", {}, el("th", {}, "Consumer"), el("th", {class: "num"}, "Checkpoint"), el("th", {class: "num"}, "Lag (events)"), el("th", {class: "num"}, "Oldest unprocessed"), el("th", {}, "Runs"))),
        el("tbody", {}, rows)) : "");
    errors.replaceChildren(...last.errors.map((e) => el("div", {class: "error", role: "alert"}, "Sample " + last.seq + ": " + e)));
  };

  const tick = async () => {
    const r = await api("dashboard" + (since === null ? "" : "?since=" + since));
    if (stopped) return;
    if (since !== null && r.next < since) samples = []; // the server started afresh
    res = r;
    samples.push(...r.samples);
    if (samples.length > r.max_samples) samples.splice(0, samples.length - r.max_samples);
    since = r.next;
    draw();
  };
  const loop = () => {
    if (stopped) return;
    timer = setTimeout(() => tick().then(loop, (err) => {
      if (stopped) return;
      if (err.status === 401) { stopTail(); loginView("The server refused the token."); return; }
      status.textContent = "error";
      status.className = "badge bad";
      errors.replaceChildren(fail(err));
      loop();
    }), res.interval_ms);
  };
  await tick();
  loop();
}

// ---- retention -------------------------------------------------------------------

// policyText describes a retention policy as the CLI does.
function policyText(p) {
  const parts = [];
  if (p.max_age) parts.push("max age " + p.max_age);
  if (p.max_count) parts.push("max count " + p.max_count);
  if (p.truncate_before) parts.push("before version " + p.truncate_before);
  if (!parts.length) parts.push("no limit");
  if (p.allow_empty) parts.push("may remove the last event");
  return parts.join(", ");
}

async function retentionView() {
  const res = await api("retention");
  const rows = res.policies.map((p) => el("tr", {"data-target": p.category ? "category:" + p.category : "stream:" + p.stream},
    el("td", {}, p.category ? "category" : "stream"),
    el("td", {class: "mono"}, p.category ? p.category : streamLink(p.stream)),
    el("td", {}, policyText(p)),
    el("td", {}, when(p.updated_at))));
  const r = res.last_report;
  const truncations = r && r.truncations ? r.truncations.map((t) => el("tr", {},
    el("td", {class: "mono"}, streamLink(t.stream)), el("td", {class: "num"}, t.before), el("td", {class: "num"}, t.removed))) : [];
  show(
    el("h1", {}, "Retention"),
    el("p", {class: "muted"}, "Policies of package retention: a stream's own replaces its category's; the scavenger (an application's retention.Scavenger, or varve retention run) truncates streams to them."),
    res.categories ? null : el("div", {class: "error", id: "no-categories"}, "This store cannot list its streams: its scavenger skips category policies."),
    el("div", {class: "cards", id: "retention-last"}, r ? [
      card("Last pass", when(r.finished), "last-pass"),
      card("Events removed", r.removed.toLocaleString("en"), "removed"),
      card("Streams truncated", r.truncated + " of " + r.streams, "truncated"),
      card("Errors", r.errors + (r.incomplete ? " (incomplete)" : ""), "errors"),
    ] : card("Last pass", "none recorded", "last-pass")),
    el("table", {id: "retention"},
      el("thead", {}, el("tr", {}, el("th", {}, "Kind"), el("th", {}, "Name"), el("th", {}, "Policy"), el("th", {}, "Updated"))),
      el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", {colspan: 4, class: "muted"}, "No retention policies in this store.")))),
    truncations.length ? el("h2", {}, "Truncated by the last pass") : null,
    truncations.length ? el("table", {id: "retention-truncations"},
      el("thead", {}, el("tr", {}, el("th", {}, "Stream"), el("th", {class: "num"}, "Events below"), el("th", {class: "num"}, "Removed"))),
      el("tbody", {}, truncations)) : null,
    r && r.problems ? el("div", {class: "error", id: "retention-problems"}, r.problems.map((p) => el("div", {}, p))) : null);
}

// ---- erasures --------------------------------------------------------------------

// countText is a report's count, or "-" when the erasure did not count.
function countText(r, n) { return r.counted ? n.toLocaleString("en") : "-"; }

async function erasuresView() {
  const res = await api("erasures");
  const flash = sessionStorage.getItem("varve-flash");
  sessionStorage.removeItem("varve-flash");
  const rows = res.erasures.map((r) => el("tr", {"data-subject": r.subject},
    el("td", {}, when(r.at)),
    el("td", {class: "mono"}, r.subject),
    el("td", {class: "mono"}, r.key),
    el("td", {class: "num"}, countText(r, r.events)),
    el("td", {class: "num"}, countText(r, r.snapshots)),
    el("td", {class: "num"}, countText(r, r.parked)),
    el("td", {class: "num"}, (r.read_models || []).reduce((n, m) => n + m.rows, 0).toLocaleString("en")),
    el("td", {}, r.count_error ? el("span", {class: "error"}, "not counted: " + r.count_error)
      : (r.read_models || []).map((m) => el("div", {}, m.read_model + ": " + m.rows + " rows")))));
  const out = el("div", {id: "erase-out"});
  const subject = el("input", {type: "text", id: "erase-subject", size: 24, autocomplete: "off", spellcheck: "false", placeholder: "subject", "aria-label": "subject to erase"});
  const count = el("input", {type: "checkbox", id: "erase-count"});
  const start = (ev) => {
    ev.preventDefault();
    const name = subject.value.trim();
    if (!name) { out.replaceChildren(fail(new Error("Give the subject to erase."))); return; }
    typedConfirm(out, name, "Erase " + name + "? Its data key is destroyed: what it sealed reads as erased from now on, also in backups and replicas. It cannot be undone.", "Erase for good",
      async () => {
        try {
          const r = await api("erasures", {method: "POST", body: {subject: name, count: count.checked}});
          sessionStorage.setItem("varve-flash", "Erased " + r.subject + ": key " + r.key + " destroyed" +
            (r.counted ? "; " + r.events + " events, " + r.snapshots + " snapshots and " + r.parked + " parked records were sealed with it." : "."));
          route();
        } catch (err) { out.replaceChildren(fail(err)); }
      });
  };
  const canErase = info.writes && res.erase;
  show(
    el("h1", {}, "Erasures"),
    flash ? el("div", {class: "notice", id: "flash"}, flash) : null,
    el("p", {class: "muted"}, "Reports of package shred's erasures, newest first: the subject whose data key was destroyed, and what was sealed with it (- : the erasure did not count). Read models add the rows they removed as they do."),
    el("table", {id: "erasures"},
      el("thead", {}, el("tr", {}, el("th", {}, "Erased"), el("th", {}, "Subject"), el("th", {}, "Key"), el("th", {class: "num"}, "Events"),
        el("th", {class: "num"}, "Snapshots"), el("th", {class: "num"}, "Parked"), el("th", {class: "num"}, "Read-model rows"), el("th", {}, "Notes"))),
      el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", {colspan: 8, class: "muted"}, "No erasures in this store.")))),
    canErase ? el("details", {class: "form lifecycle", id: "erase-box"}, el("summary", {}, "Erase a subject"),
      el("form", {class: "toolbar", id: "erase", onsubmit: start},
        el("label", {}, "Subject ", subject), el("label", {}, count, " count what it sealed (reads the whole log)"),
        el("button", {type: "submit", class: "danger", id: "erase-start"}, "Erase…")), out)
      : el("p", {class: "muted", id: "erase-off"}, info.writes ? "The server has no master key: start it with VARVE_MASTER_KEY or VARVE_MASTER_KEY_FILE to erase here." : "Writes are disabled: this server cannot erase."));
}

// ---- workflows -------------------------------------------------------------------

// Workflow instances (package workflow): a workflow has no registry, so the
// page asks for its name; an instance's page retries or cancels it.
async function workflowsView(arg, q) {
  if (arg) return workflowView(arg);
  const name = q.get("name") || "", after = q.get("after") || "";
  const input = el("input", {type: "text", id: "workflow-name", value: name, size: 24, autocomplete: "off", spellcheck: "false", placeholder: "workflow name, such as orderfulfilment", "aria-label": "workflow name"});
  const form = el("form", {class: "toolbar", id: "workflow-find", onsubmit: (ev) => {
    ev.preventDefault();
    location.hash = "#/workflows?" + new URLSearchParams({name: input.value.trim()});
  }}, el("label", {}, "Workflow ", input), el("button", {type: "submit", id: "workflow-go"}, "List instances"));
  if (!name) {
    show(el("h1", {}, "Workflows"), el("p", {class: "muted"}, "Instances of a durable workflow (package workflow): streams <name>-<instance>, with their pending timers, unsent commands and last error."), form);
    return;
  }
  const params = new URLSearchParams({limit: "50"});
  if (after) params.set("after", after);
  const page = await api("workflows/" + enc(name) + "?" + params);
  const rows = page.instances.map((s) => el("tr", {"data-stream": s.stream},
    el("td", {class: "mono"}, el("a", {href: "#/workflows/" + enc(name) + "/" + enc(s.stream.slice(name.length + 1))}, s.stream)),
    el("td", {class: "num"}, s.version),
    el("td", {}, s.cancelled ? el("span", {class: "badge warn"}, "cancelled") : (s.last_event || "")),
    el("td", {class: "num"}, s.inputs),
    el("td", {}, s.pending && s.pending.length ? s.pending.length + ", next " + when(s.pending[0].due) : "0"),
    el("td", {class: "num"}, s.unsent ? s.unsent.length : 0),
    el("td", {}, s.last_error ? el("span", {class: "error"}, s.last_error.error) : "")));
  show(el("h1", {}, "Workflows"), form,
    el("table", {id: "workflows"},
      el("thead", {}, el("tr", {}, el("th", {}, "Instance"), el("th", {class: "num"}, "Version"), el("th", {}, "State"), el("th", {class: "num"}, "Inputs"),
        el("th", {}, "Pending timers"), el("th", {class: "num"}, "Unsent"), el("th", {}, "Last error"))),
      el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", {colspan: 7, class: "muted"}, "No instances of " + name + ".")))),
    page.next ? el("p", {}, el("a", {id: "workflows-next", href: "#/workflows?" + new URLSearchParams({name, after: page.next})}, "Next page")) : null);
}

async function workflowView(arg) {
  const [name, ...rest] = arg.split("/");
  const instance = rest.join("/");
  const path = "workflows/" + enc(name) + "/instances/" + enc(instance);
  const s = await api(path);
  const flash = sessionStorage.getItem("varve-flash");
  sessionStorage.removeItem("varve-flash");
  const out = el("div", {id: "workflow-out"});
  const act = async (op, body, notice) => {
    try {
      await api(path + "/" + op, {method: "POST", body});
      sessionStorage.setItem("varve-flash", notice);
      route();
    } catch (err) { out.replaceChildren(fail(err)); }
  };
  const reason = el("input", {type: "text", id: "cancel-reason", size: 30, placeholder: "reason (recorded)", "aria-label": "reason"});
  const actions = !info.writes ? el("p", {class: "muted", id: "workflow-off"}, "Writes are disabled: this server cannot retry or cancel.")
    : s.cancelled ? null : el("div", {class: "toolbar", id: "workflow-actions"},
      s.last_error ? el("button", {type: "button", id: "workflow-retry", onclick: () => act("retry", {}, "Asked the runner of " + s.stream + " to apply its failed input again.")}, "Retry the failed input") : null,
      reason,
      el("button", {type: "button", class: "danger", id: "workflow-cancel", onclick: () => typedConfirm(out, s.stream,
        "Cancel " + s.stream + "? Its runner takes no more input, its timers are cancelled and its unsent commands are not sent.", "Cancel the instance",
        () => act("cancel", {reason: reason.value}, "Cancelled " + s.stream + "."))}, "Cancel…"));
  show(
    el("h1", {}, s.stream),
    flash ? el("div", {class: "notice", id: "flash"}, flash) : null,
    el("div", {class: "cards", id: "workflow-cards"},
      card("State", s.cancelled ? "cancelled" + (s.reason ? ": " + s.reason : "") : (s.last_event || "none yet"), "workflow-state"),
      card("Version", String(s.version), "workflow-version"),
      card("Inputs", s.inputs + (s.last_input ? ", last " + when(s.last_input) : ""), "workflow-inputs")),
    s.last_error ? el("div", {class: "error", id: "workflow-error"}, "Last error, " + when(s.last_error.at) + ", input " + s.last_error.input + " (" + s.last_error.type + "): " + s.last_error.error) : null,
    el("h2", {}, "Pending timers"),
    el("table", {id: "workflow-timers"}, el("thead", {}, el("tr", {}, el("th", {}, "Timer"), el("th", {}, "Due"))),
      el("tbody", {}, s.pending && s.pending.length ? s.pending.map((t) => el("tr", {}, el("td", {class: "mono"}, t.id), el("td", {}, when(t.due))))
        : el("tr", {}, el("td", {colspan: 2, class: "muted"}, "None.")))),
    el("h2", {}, "Unsent commands"),
    el("table", {id: "workflow-unsent"}, el("thead", {}, el("tr", {}, el("th", {}, "Command id"), el("th", {}, "Type"))),
      el("tbody", {}, s.unsent && s.unsent.length ? s.unsent.map((c) => el("tr", {}, el("td", {class: "mono"}, c.id), el("td", {}, c.type)))
        : el("tr", {}, el("td", {colspan: 2, class: "muted"}, "None.")))),
    el("p", {}, "Its events: ", streamLink(s.stream)),
    actions, out);
}

// ---- reports ---------------------------------------------------------------------

async function reportsView(name) {
  if (name) {
    const res = await fetch(API + "reports/" + enc(name), {headers: {"Authorization": "Bearer " + sessionStorage.getItem(tokenKey)}, cache: "no-store"});
    if (!res.ok) throw new APIError(res.status, "", (await res.json()).error.message);
    const frame = el("iframe", {class: "report", sandbox: "", title: name, id: "report"});
    frame.srcdoc = await res.text();
    show(el("p", {class: "toolbar"}, el("a", {href: "#/reports"}, "← All reports"), el("span", {class: "mono"}, name)), frame);
    return;
  }
  const res = await api("reports");
  const rows = res.reports.map((r) => el("tr", {},
    el("td", {class: "mono"}, el("a", {href: "#/reports/" + enc(r.name)}, r.name)),
    el("td", {class: "num"}, Math.round(r.size / 1024) + " KiB"),
    el("td", {}, when(r.modified))));
  show(
    el("h1", {}, "Lab reports"),
    el("p", {class: "muted"}, info.reports ? "The HTML reports of the lab (varve bench --html FILE, ...) in the server's reports directory." : "The server was started without a reports directory (varve serve --reports DIR)."),
    el("table", {id: "reports"},
      el("thead", {}, el("tr", {}, el("th", {}, "Report"), el("th", {class: "num"}, "Size"), el("th", {}, "Modified"))),
      el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", {colspan: 3, class: "muted"}, "No reports.")))));
}

// ---- start -----------------------------------------------------------------------

window.addEventListener("hashchange", route);
document.getElementById("logout").addEventListener("click", () => {
  sessionStorage.removeItem(tokenKey);
  info = null;
  if (stopTail) { stopTail(); stopTail = null; }
  loginView();
});
if (sessionStorage.getItem(tokenKey)) {
  start().catch((err) => loginView(err.status === 401 ? "The server refused the token." : err.message));
} else {
  loginView();
}
