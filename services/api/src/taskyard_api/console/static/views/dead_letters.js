// Dead letters (admin keys): filter, select, replay (optionally on another specialist, or from scratch)
// or discard, one at a time or the selection at once. Discarding asks first.

import { ApiError, api, auth, collect } from "../api.js";
import { h, hashParams, hashWith, notice, preview, shortId, time } from "../dom.js";

const REASONS = ["delivery_limit", "rejected", "expired", "maxlen"];
const MOST = 500;
// A dead letter does not carry its task's input: the first ones shown read it from their task.
const INPUTS = 100;
const READERS = 4;

export async function deadLettersView(main, { signal }) {
  const params = hashParams();
  const filters = { specialist: params.get("specialist") ?? "", reason: params.get("reason") ?? "" };
  const specialists = (await api("/v1/specialists", { signal })).items.map((s) => s.name);
  let letters;
  let more;
  try {
    [letters, more] = await collect("/v1/dead-letters", filters, MOST, signal);
  } catch (error) {
    if (error instanceof ApiError && error.status === 403) {
      main.replaceChildren(h("h1", { text: "Dead letters" }),
        notice("Dead letters need an admin API key; this key's role may not see them.", "error"),
        h("button", { type: "button", onclick: () => { auth.forget(); window.dispatchEvent(new CustomEvent("taskyard:unauthorized")); }, text: "Use another key" }));
      return;
    }
    throw error;
  }

  const selected = new Set();
  const messages = h("div", { id: "outcome" });
  const go = (changes) => { location.hash = hashWith("#/dead-letters", { ...filters, ...changes }); };
  const reload = () => window.dispatchEvent(new HashChangeEvent("hashchange"));
  const replayOn = h("select", { id: "replay-specialist" }, h("option", { value: "", text: "where it died" }), specialists.map((name) => h("option", { value: name, text: name })));
  const fromScratch = h("input", { type: "checkbox", id: "from-scratch" });
  const replaySelected = h("button", { type: "button", id: "replay-selected", disabled: true, onclick: () => act("replay", [...selected]) });
  const discardSelected = h("button", { type: "button", class: "danger", id: "discard-selected", disabled: true, onclick: () => confirmDiscard([...selected]) });
  const all = h("input", { type: "checkbox", id: "select-all", title: "Select all", onchange: (event) => {
    for (const box of main.querySelectorAll("input[data-task-id]")) { box.checked = event.target.checked; toggle(box.dataset.taskId, box.checked); }
  } });

  function toggle(id, on) {
    if (on) selected.add(id); else selected.delete(id);
    replaySelected.textContent = `Replay selected (${selected.size})`;
    discardSelected.textContent = `Discard selected (${selected.size})`;
    replaySelected.disabled = discardSelected.disabled = selected.size === 0;
  }
  toggle(null, false);

  async function act(action, ids) {
    const body = { ...(replayOn.value ? { specialist: replayOn.value } : {}), ...(fromScratch.checked ? { from_scratch: true } : {}) };
    const done = [];
    const refused = [];
    for (const id of ids) {
      try {
        if (action === "replay") await api(`/v1/dead-letters/${encodeURIComponent(id)}/replay`, { method: "POST", body, signal });
        else await api(`/v1/dead-letters/${encodeURIComponent(id)}`, { method: "DELETE", signal });
        done.push(id);
      } catch (error) {
        if (signal.aborted) return;
        refused.push(`${shortId(id)}: ${error.message}`);
      }
    }
    const verb = action === "replay" ? "Replayed" : "Discarded";
    sessionStorage.setItem("taskyard.outcome", JSON.stringify({ text: `${verb} ${done.length} dead letter(s).${refused.length ? ` Refused: ${refused.join("; ")}` : ""}`, kind: refused.length ? "error" : "ok" }));
    reload();
  }

  function confirmDiscard(ids) {
    const dialog = h("dialog", { class: "card", id: "confirm-discard" },
      h("p", { text: `Discard ${ids.length} dead letter(s)? The task(s) stay dead_lettered and will not run.` }),
      h("div", { class: "actions" },
        h("button", { type: "button", onclick: () => { dialog.close(); dialog.remove(); }, text: "Keep" }),
        h("button", { type: "button", class: "danger", id: "confirm", onclick: () => { dialog.close(); dialog.remove(); act("discard", ids); }, text: "Discard" })));
    main.append(dialog);
    dialog.showModal();
  }

  const filter = (id, label, values, current, key) => h("label", { for: id }, label,
    h("select", { id, value: current, onchange: (event) => go({ [key]: event.target.value }) },
      h("option", { value: "", text: "any" }), values.map((value) => h("option", { value, text: value }))));

  const rows = letters.map((letter) => h("tr", { dataset: { taskId: letter.task_id } },
    h("td", {}, h("input", { type: "checkbox", "aria-label": `Select ${letter.task_id}`, dataset: { taskId: letter.task_id }, onchange: (event) => toggle(letter.task_id, event.target.checked) })),
    h("td", { text: time(letter.recorded_at) }),
    h("td", {}, h("a", { href: `#/tasks/${letter.task_id}`, class: "mono", title: letter.task_id, text: shortId(letter.task_id) })),
    h("td", { text: letter.specialist ?? "(intake)" }),
    h("td", { class: "input-preview", dataset: { inputOf: letter.task_id }, text: "…" }),
    h("td", { text: letter.reason }),
    h("td", { class: "mono", text: letter.queue }),
    h("td", { class: "num", text: letter.deaths.reduce((sum, death) => sum + (Number(death.count) || 1), 0) }),
    h("td", { class: "actions" },
      h("button", { type: "button", class: "replay", onclick: () => act("replay", [letter.task_id]), text: "Replay" }),
      h("button", { type: "button", class: "danger discard", onclick: () => confirmDiscard([letter.task_id]), text: "Discard" })),
  ));

  const outcome = sessionStorage.getItem("taskyard.outcome");
  sessionStorage.removeItem("taskyard.outcome");
  if (outcome) {
    const { text, kind } = JSON.parse(outcome);
    messages.append(notice(text, kind));
  }
  main.replaceChildren(
    h("div", { class: "title-row" }, h("h1", { text: "Dead letters" }), h("span", { class: "muted", text: `${letters.length}${more ? "+" : ""} open` })),
    messages,
    h("form", { class: "filters", onsubmit: (event) => event.preventDefault() },
      filter("filter-specialist", "Specialist", specialists, filters.specialist, "specialist"),
      filter("filter-reason", "Reason", REASONS, filters.reason, "reason")),
    h("div", { class: "toolbar" },
      h("label", { for: "replay-specialist" }, "Replay on", replayOn),
      h("label", { for: "from-scratch", class: "inline" }, fromScratch, "from scratch (drop its checkpoints)"),
      replaySelected, discardSelected),
    h("table", { class: "list", id: "dead-letters" },
      h("thead", {}, h("tr", {}, h("th", {}, all), ["Recorded", "Task", "Specialist", "Input", "Reason", "Queue", "Deaths", ""].map((name) => h("th", { text: name })))),
      h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: 9, class: "muted", text: "No open dead letters." })))),
  );
  await fillInputs(main, signal);
}

async function fillInputs(main, signal) {
  const cells = [...main.querySelectorAll("td[data-input-of]")];
  for (const cell of cells.splice(INPUTS)) cell.textContent = "(see the task)";
  const next = async () => {
    for (let cell = cells.shift(); cell && !signal.aborted; cell = cells.shift()) {
      try {
        const task = await api(`/v1/tasks/${encodeURIComponent(cell.dataset.inputOf)}`, { signal });
        cell.textContent = preview(task.input, 70);
      } catch {
        cell.textContent = "—";
      }
    }
  };
  await Promise.all(Array.from({ length: READERS }, next));
}
