// One task group: its status, how many children are in each status, the reduce step, and its children a
// page at a time (oldest first), refreshed every few seconds while shown; a cancel for an unfinished group.

import { api } from "../api.js";
import { STATUSES, badge, h, hashParams, hashWith, notice, shortId, sleep, time } from "../dom.js";

const REFRESH_MS = 2500;
const PAGE = 50;
const GROUP_DONE = new Set(["completed", "failed", "cancelled"]);

export async function groupView(main, { match, signal }) {
  const id = match[1];
  const path = `/v1/task-groups/${encodeURIComponent(id)}`;
  const cursor = hashParams().get("cursor") ?? "";
  const head = h("div", { class: "title-row" });
  const facts = h("dl", { class: "facts" });
  const counts = h("tbody");
  const children = h("tbody");
  const footer = h("div", { class: "pager" });
  const problems = h("div");
  main.replaceChildren(
    h("p", {}, h("a", { href: "#/tasks", text: "← Tasks" })),
    head, problems,
    h("div", { class: "columns" },
      h("section", { class: "card" }, h("h2", { text: "Group" }), facts),
      h("section", { class: "card" }, h("h2", { text: "Children by status" }),
        h("table", { class: "list", id: "group-counts" },
          h("thead", {}, h("tr", {}, h("th", { text: "Status" }), h("th", { text: "Tasks" }))), counts))),
    h("section", { class: "card" }, h("h2", { text: "Children" }),
      h("table", { class: "list", id: "group-children" },
        h("thead", {}, h("tr", {}, ["Task", "Status", "Specialist"].map((name) => h("th", { text: name })))), children),
      footer),
  );

  const cancel = async () => {
    try {
      show(await api(`${path}/cancel`, { method: "POST", signal }));
    } catch (error) {
      problems.replaceChildren(notice(error.message, "error"));
    }
  };

  const show = (group) => {
    head.replaceChildren(
      h("h1", {}, "Group ", h("span", { class: "mono", text: group.id })),
      badge(group.status),
      GROUP_DONE.has(group.status) ? "" : h("button", { type: "button", class: "danger", id: "cancel-group", onclick: cancel, text: "Cancel group" }),
    );
    const rows = [
      ["Tasks", group.total],
      ["Created", time(group.created_at)],
      ["Reduce step", group.reduce_task_id ? h("a", { href: `#/tasks/${group.reduce_task_id}`, class: "mono", text: shortId(group.reduce_task_id) }) : "—"],
    ];
    facts.replaceChildren(...rows.flatMap(([name, value]) => [h("dt", { text: name }), h("dd", {}, value)]));
    counts.replaceChildren(...STATUSES.filter((s) => group.counts?.[s]).map((s) =>
      h("tr", { dataset: { status: s } }, h("td", {}, badge(s)), h("td", { class: "num", text: group.counts[s] }))));
    const page = group.children ?? { items: [], next_cursor: null };
    children.replaceChildren(...page.items.map((child) => h("tr", { dataset: { taskId: child.id, status: child.status } },
      h("td", {}, h("a", { href: `#/tasks/${child.id}`, class: "mono", title: child.id, text: shortId(child.id) })),
      h("td", {}, badge(child.status)),
      h("td", { text: child.specialist ?? "—" }))));
    footer.replaceChildren(
      cursor ? h("a", { href: hashWith(`#/groups/${group.id}`, {}), text: "← First" }) : "",
      page.next_cursor ? h("a", { href: hashWith(`#/groups/${group.id}`, { cursor: page.next_cursor }), text: "Next →" }) : "",
    );
  };

  for (let first = true; !signal.aborted; first = false) {
    try {
      const group = await api(path, { params: { cursor, limit: PAGE }, signal });
      show(group);
      if (GROUP_DONE.has(group.status)) return;
    } catch (error) {
      if (first || signal.aborted || error.status === 401) throw error;
    }
    await sleep(REFRESH_MS, signal);
  }
}
