// The console's only way to the API: fetch() with the key, if any, in the Authorization header (kept in
// this tab's sessionStorage; never in a URL), problem documents turned into ApiError, and the task event
// stream with resumption after a dropped connection (Last-Event-ID).

import { TERMINAL, sleep } from "./dom.js";
import { SseParser } from "./sse.js";

const KEY = "taskyard.apiKey";
// The console is served at <api root>/console/: the API is one level up.
const ROOT = new URL("../", document.baseURI);

export class ApiError extends Error {
  constructor(status, problem) {
    const title = problem?.title || `HTTP ${status}`;
    super(problem?.detail ? `${title}: ${problem.detail}` : title);
    this.status = status;
    this.problem = problem ?? {};
  }
}

export const auth = {
  key: () => sessionStorage.getItem(KEY),
  set(key) { sessionStorage.setItem(KEY, key); },
  forget() { sessionStorage.removeItem(KEY); },
};

function headers(extra = {}) {
  const found = new Headers({ Accept: "application/json", ...extra });
  const key = auth.key();
  if (key) found.set("Authorization", `Bearer ${key}`);
  return found;
}

function url(path, params) {
  const found = new URL(path.replace(/^\//, ""), ROOT);
  for (const [name, value] of Object.entries(params ?? {})) {
    if (value !== undefined && value !== null && value !== "") found.searchParams.set(name, String(value));
  }
  return found;
}

async function refusal(response) {
  let problem = null;
  try { problem = await response.json(); } catch { problem = null; }
  const error = new ApiError(response.status, problem);
  if (response.status === 401) window.dispatchEvent(new CustomEvent("taskyard:unauthorized"));
  return error;
}

export async function api(path, { method = "GET", params, body, signal } = {}) {
  const init = { method, signal, headers: headers(), cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer" };
  if (body !== undefined) {
    init.headers.set("Content-Type", "application/json");
    init.body = JSON.stringify(body);
  }
  const response = await fetch(url(path, params), init);
  if (!response.ok) throw await refusal(response);
  return response.status === 204 ? null : response.json();
}

// Every page of a list route, up to `most` items; returns [items, more].
export async function collect(path, params, most, signal) {
  const items = [];
  let cursor = null;
  do {
    const page = await api(path, { params: { ...params, limit: Math.min(200, most - items.length), cursor }, signal });
    items.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor && items.length < most);
  return [items, Boolean(cursor)];
}

// Follows a task's events from `after` to its end, calling onEvent(event) once per event in order;
// onState("live" | "reconnecting" | "ended") says how the stream is doing. Resolves when the API ended the
// stream after a terminal event (not at the terminal event itself: a replayed dead letter goes on past
// dead_lettered, and the API sends all it has first) or `signal` aborted; rejects on a refusal that a
// retry will not fix (401, 403, 404).
export async function followEvents(taskId, { after = 0, onEvent, onState = () => {}, signal }) {
  let last = after;
  let lastType = null;
  let failures = 0;
  while (!signal.aborted) {
    let progressed = false;
    let cleanEnd = false;
    try {
      const response = await fetch(url(`/v1/tasks/${encodeURIComponent(taskId)}/events`), {
        headers: headers({ Accept: "text/event-stream", "Last-Event-ID": String(last) }),
        signal, cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer",
      });
      if (!response.ok) {
        const error = await refusal(response);
        if (response.status < 500 && response.status !== 429) throw error;
      } else {
        onState("live");
        const parser = new SseParser();
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) { cleanEnd = true; break; }
          for (const frame of parser.feed(value)) {
            const event = JSON.parse(frame.data);
            if (!(event.seq > last)) continue; // a repeat after a reconnection
            last = event.seq;
            lastType = event.type;
            progressed = true;
            onEvent(event);
          }
        }
        if (TERMINAL.has(lastType)) { onState("ended"); return last; }
      }
    } catch (error) {
      if (signal.aborted) return last;
      if (error instanceof ApiError) throw error;
      // A dropped connection (TypeError from fetch or the reader): resume below.
    }
    if (cleanEnd && !progressed) {
      // Nothing after our position: the task ended before it, or the API was stopping.
      const task = await api(`/v1/tasks/${encodeURIComponent(taskId)}`, { signal });
      if (TERMINAL.has(task.status)) { onState("ended"); return last; }
    }
    failures = progressed ? 1 : failures + 1;
    onState("reconnecting");
    await sleep(Math.min(10000, 500 * 2 ** (failures - 1)), signal);
  }
  return last;
}
