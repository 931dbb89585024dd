// One task: its document, the answer as it is written (token events), and its event timeline, live from
// the event stream until the terminal event. The document is read again whenever an event may have
// changed it.

import { ApiError, api, followEvents } from "../api.js";
import { AnswerText } from "../answer.js";
import { TERMINAL, badge, clock, h, inputText, notice, seconds, time } from "../dom.js";

// Events after which the task document is worth reading again.
const CHANGES = new Set(["routed", "attempt_started", "retry_scheduled", "handed_back", "lease_expired", "replayed", "cancel_requested", "delegated", "resumed", ...TERMINAL]);

export async function taskView(main, { match, signal }) {
  const id = match[1];
  const path = `/v1/tasks/${encodeURIComponent(id)}`;
  let task = await api(path, { signal });

  const head = h("div", { class: "title-row" });
  const facts = h("dl", { class: "facts" });
  const outcome = h("div");
  const answerLabel = h("h2", { text: "Answer" });
  const answer = h("pre", { class: "answer", id: "answer", text: "" });
  const timeline = h("ol", { class: "timeline", id: "timeline" });
  const streamState = h("span", { class: "muted", id: "stream-state", text: "connecting…" });
  const answerText = new AnswerText();
  let tokens = null; // the timeline entry that gathers consecutive token events

  main.replaceChildren(
    h("p", {}, h("a", { href: "#/tasks", text: "← Tasks" })),
    head,
    h("div", { class: "columns" },
      h("section", { class: "card" }, h("h2", { text: "Task" }), facts,
        h("h2", { text: "Input" }), h("pre", { class: "input", id: "input", text: inputText(task.input) })),
      h("section", { class: "card" }, answerLabel, answer, outcome)),
    h("section", { class: "card" }, h("div", { class: "title-row" }, h("h2", { text: "Events" }), streamState), timeline),
  );

  const show = () => {
    head.replaceChildren(
      h("h1", {}, "Task ", h("span", { class: "mono", text: task.id })),
      badge(task.status),
      TERMINAL.has(task.status) ? "" : h("button", { type: "button", class: "danger", id: "cancel", onclick: cancel, text: task.cancel_requested_at ? "Cancel requested" : "Cancel", disabled: Boolean(task.cancel_requested_at) }),
    );
    facts.replaceChildren(...describe(task));
    outcome.replaceChildren(...consequences(task));
    if (task.status === "completed" && task.result) {
      answerLabel.textContent = "Answer";
      answer.textContent = typeof task.result.output === "string" ? task.result.output : JSON.stringify(task.result, null, 2);
    } else if (!answerText.text) {
      answer.textContent = TERMINAL.has(task.status) ? "(no answer)" : "(nothing written yet)";
    }
  };

  const cancel = async () => {
    try {
      task = await api(`${path}/cancel`, { method: "POST", signal });
      show();
    } catch (error) {
      outcome.prepend(notice(error.message, "error"));
    }
  };

  let reading = Promise.resolve();
  const refresh = () => {
    reading = reading.then(async () => { task = await api(path, { signal }); show(); }).catch(() => {});
  };

  show();
  const onEvent = (event) => {
    if (event.type === "token") {
      if (answerText.apply(event)) {
        answerLabel.textContent = `Answer (writing step ${answerText.step})`;
        answer.textContent = answerText.text;
      }
      tokens = gatherTokens(timeline, tokens, event);
      return;
    }
    tokens = null;
    if (answerText.apply(event)) answer.textContent = answerText.text;
    timeline.append(entry(event));
    if (CHANGES.has(event.type)) refresh();
  };
  const onState = (state) => { streamState.textContent = state === "live" ? "live" : state === "ended" ? "ended" : "reconnecting…"; };
  try {
    await followEvents(id, { onEvent, onState, signal });
  } catch (error) {
    if (!(error instanceof ApiError) || signal.aborted) throw error;
    streamState.textContent = `stream refused: ${error.message}`;
  }
  await reading;
}

function describe(task) {
  const routing = task.routing;
  const rows = [
    ["Specialist", task.specialist ?? (task.requested_specialist ? `${task.requested_specialist} (asked)` : "not routed yet")],
    ["Routing", routing ? `${routing.method}, confidence ${Number(routing.confidence).toFixed(2)}: ${routing.reason}` : "—"],
    ["Attempts", task.attempts],
    ["Created", time(task.created_at)],
    ["Started", time(task.started_at)],
    ["Finished", time(task.finished_at)],
    ["Run time", seconds(task.started_at, task.finished_at)],
    ["Tokens", `${task.usage?.total_tokens ?? 0} (${task.usage?.prompt_tokens ?? 0} in, ${task.usage?.completion_tokens ?? 0} out)`],
  ];
  if (task.priority && task.priority !== "normal") rows.push(["Priority", task.priority]);
  if (task.not_before) rows.push(["Not before", time(task.not_before)]);
  if (task.deadline) rows.push(["Deadline", time(task.deadline)]);
  if (task.group) rows.push(["Group", h("a", { href: `#/groups/${task.group.id}`, class: "mono", text: `${task.group.id.slice(0, 8)} (${task.group.role})` })]);
  if (task.parent) rows.push(["Parent", h("a", { href: `#/tasks/${task.parent}`, class: "mono", text: task.parent.slice(0, 8) })]);
  if (task.next_attempt_at) rows.push(["Next attempt", time(task.next_attempt_at)]);
  const metadata = Object.entries(task.metadata ?? {});
  if (metadata.length) rows.push(["Metadata", metadata.map(([key, value]) => `${key}=${value}`).join(", ")]);
  return rows.flatMap(([name, value]) => [h("dt", { text: name }), value instanceof Node ? h("dd", {}, value) : h("dd", { text: value })]);
}

function consequences(task) {
  const parts = [];
  if (task.error) parts.push(notice(`Failed (${task.error.type}): ${task.error.message}`, "error"));
  if (task.dead_letter) {
    parts.push(notice(`Dead-lettered: ${task.dead_letter.reason} in ${task.dead_letter.queue}.`, "error"),
      h("p", {}, h("a", { href: "#/dead-letters", text: "Replay or discard it in Dead letters →" })));
  }
  if (task.status === "cancelled") parts.push(notice("Cancelled.", "warn"));
  return parts;
}

function entry(event) {
  return h("li", { dataset: { seq: event.seq, type: event.type } },
    h("span", { class: "seq", text: `#${event.seq}` }),
    h("time", { datetime: event.at, text: clock(event.at) }),
    h("span", { class: `event event-${event.type.replace(/[^a-z_]/g, "")}`, text: event.type.replaceAll("_", " ") }),
    h("span", { class: "summary", text: summary(event) }),
  );
}

function gatherTokens(timeline, current, event) {
  const step = event.data?.step ?? 0;
  if (current && current.step === step) {
    current.count += 1;
    current.chars += event.data.restart ? 0 : (event.data.text ?? "").length;
    current.restarts += event.data.restart ? 1 : 0;
  } else {
    current = { step, count: 1, chars: (event.data.text ?? "").length, restarts: event.data.restart ? 1 : 0, node: null, first: event };
    current.node = entry(event);
    timeline.append(current.node);
  }
  current.node.lastChild.textContent = `step ${step}: ${current.count} piece(s), ${current.chars} characters${current.restarts ? `, ${current.restarts} restart(s)` : ""}`;
  current.node.firstChild.textContent = current.count > 1 ? `#${current.first.seq}–${event.seq}` : `#${event.seq}`;
  current.node.dataset.lastSeq = event.seq;
  return current;
}

function summary(event) {
  const d = event.data ?? {};
  switch (event.type) {
    case "accepted": return d.specialist ? `for ${d.specialist}` : "awaiting routing";
    case "routed": return `to ${d.specialist} (${d.method}${d.confidence !== undefined ? `, ${Number(d.confidence).toFixed(2)}` : ""}${d.cached ? ", cached" : ""})`;
    case "attempt_started": return `attempt ${d.attempt} on ${d.worker ?? "a worker"}`;
    case "llm_call": return `step ${d.step}: ${d.tokens} tokens in ${Math.round(d.latency_ms ?? 0)} ms`;
    case "tool_call": return `step ${d.step}: ${d.name} ${d.ok ? "ok" : "failed"}`;
    case "retry_scheduled": return `attempt ${d.attempt} failed (${d.error}); next in ${d.delay_seconds} s`;
    case "completed": return `${d.usage?.total_tokens ?? 0} tokens`;
    case "failed": return d.error ? `${d.error.type}: ${d.error.message}` : "";
    case "dead_lettered": return `${d.reason} in ${d.queue}`;
    case "replayed": return `now ${d.status}${d.specialist ? ` on ${d.specialist}` : ""}`;
    default: return Object.keys(d).length ? JSON.stringify(d) : "";
  }
}
