// The task list: newest first, filtered by status and specialist, paged by cursor, refreshed every few
// seconds while shown so statuses move live.

import { api } from "../api.js";
import { PRIORITIES, STATUSES, badge, h, hashParams, hashWith, preview, shortId, sleep, time } from "../dom.js";

const REFRESH_MS = 2500;
const PAGE = 50;

export async function tasksView(main, { signal }) {
  const params = hashParams();
  const filters = {
    status: params.get("status") ?? "", specialist: params.get("specialist") ?? "", priority: params.get("priority") ?? "", cursor: params.get("cursor") ?? "",
  };
  const specialists = (await api("/v1/specialists", { signal })).items.map((s) => s.name);

  const go = (changes) => { location.hash = hashWith("#/tasks", { ...filters, cursor: "", ...changes }); };
  const select = (id, label, values, current, key) => h("label", { for: id }, label,
    h("select", { id, value: current, onchange: (event) => go({ [key]: event.target.value }) },
      h("option", { value: "", text: "any" }),
      values.map((value) => h("option", { value, text: value.replace("_", " ") }))));

  const body = h("tbody");
  const footer = h("div", { class: "pager" });
  const updated = h("span", { class: "muted live", text: "" });
  main.replaceChildren(
    h("div", { class: "title-row" }, h("h1", { text: "Tasks" }), updated),
    h("form", { class: "filters", onsubmit: (event) => event.preventDefault() },
      select("filter-status", "Status", STATUSES, filters.status, "status"),
      select("filter-specialist", "Specialist", specialists, filters.specialist, "specialist"),
      select("filter-priority", "Priority", PRIORITIES, filters.priority, "priority")),
    h("table", { class: "list", id: "tasks" },
      h("thead", {}, h("tr", {}, ["Created", "Task", "Status", "Specialist", "Attempts", "Tokens", "Input"].map((name) => h("th", { text: name })))),
      body),
    footer,
  );

  for (let first = true; !signal.aborted; first = false) {
    try {
      const page = await api("/v1/tasks", { params: { status: filters.status, specialist: filters.specialist, priority: filters.priority, cursor: filters.cursor, limit: PAGE }, signal });
      body.replaceChildren(...page.items.map(row));
      if (!page.items.length) body.append(h("tr", {}, h("td", { colspan: 7, class: "muted", text: "No tasks." })));
      footer.replaceChildren(
        filters.cursor ? h("a", { href: hashWith("#/tasks", { ...filters, cursor: "" }), text: "← Newest" }) : "",
        page.next_cursor ? h("a", { href: hashWith("#/tasks", { ...filters, cursor: page.next_cursor }), text: "Older →" }) : "",
      );
      updated.textContent = `live · updated ${new Date().toLocaleTimeString()}`;
    } catch (error) {
      // The first load's failure is the view's; later ones (an API restart) are retried.
      if (first || signal.aborted || error.status === 401) throw error;
      updated.textContent = `refresh failed (${error.message}); retrying`;
    }
    await sleep(REFRESH_MS, signal);
  }
}

function row(task) {
  return h("tr", { dataset: { taskId: task.id, status: task.status } },
    h("td", { text: time(task.created_at) }),
    h("td", {}, h("a", { href: `#/tasks/${task.id}`, class: "mono", title: task.id, text: shortId(task.id) })),
    h("td", {}, badge(task.status)),
    h("td", { text: task.specialist ?? "—" }),
    h("td", { class: "num", text: task.attempts }),
    h("td", { class: "num", text: task.usage?.total_tokens ?? 0 }),
    h("td", { class: "input-preview", text: preview(task.input) }),
  );
}
