// Every node of the console is built here, from text: values go in with textContent or as text nodes,
// never as HTML (task inputs, answers and errors are untrusted). The page's Content-Security-Policy
// (Trusted Types with no policy) makes the browser refuse any string assigned to innerHTML anyway.

export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  let selected;
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") el.className = value;
    else if (name === "text") el.textContent = String(value);
    else if (name === "dataset") Object.assign(el.dataset, value);
    else if (name === "href") el.setAttribute("href", ownHref(value));
    else if (name.startsWith("on")) {
      if (typeof value !== "function") throw new TypeError(`${name} must be a function`);
      el.addEventListener(name.slice(2), value);
    } else if (name === "value") selected = value; // after the children: a select needs its options first
    else if (name === "checked" || name === "disabled") el[name] = value;
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, children);
  if (selected !== undefined) el.value = selected;
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// Links only ever go to the console's own views.
function ownHref(value) {
  const text = String(value);
  return text.startsWith("#/") ? text : "#/";
}

export const TERMINAL = new Set(["completed", "failed", "cancelled", "dead_lettered"]);
export const PRIORITIES = ["high", "normal", "low"];
export const STATUSES = ["scheduled", "pending", "queued", "running", "retrying", "waiting", "completed", "failed", "dead_lettered", "cancelled"];

export function badge(status) {
  return h("span", { class: `badge status-${String(status).replace(/[^a-z_]/g, "")}`, text: String(status).replace("_", " ") });
}

export function shortId(id) {
  return String(id).slice(0, 8);
}

export function time(value) {
  if (!value) return "—";
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return String(value);
  return date.toLocaleString(undefined, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

export function clock(value) {
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return String(value);
  const pad = (n, w = 2) => String(n).padStart(w, "0");
  return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)}`;
}

export function seconds(from, to) {
  if (!from || !to) return "—";
  const s = (new Date(to) - new Date(from)) / 1000;
  return Number.isFinite(s) ? `${s.toFixed(1)} s` : "—";
}

export function inputText(input) {
  return typeof input === "string" ? input : JSON.stringify(input, null, 2);
}

export function preview(input, length = 90) {
  const text = inputText(input).replace(/\s+/g, " ").trim();
  return text.length > length ? `${text.slice(0, length - 1)}…` : text;
}

export function notice(text, kind = "info") {
  return h("p", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status", text });
}

export function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
  });
}

// A hash route's query: "#/tasks?status=running" -> URLSearchParams.
export function hashParams() {
  const query = location.hash.split("?")[1] ?? "";
  return new URLSearchParams(query);
}

export function hashWith(path, params) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value) query.set(name, value);
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}
