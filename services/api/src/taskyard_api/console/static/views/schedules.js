// The tenant's cron schedules: expression and time zone, what each occurrence submits, the next and last
// occurrence and its task; pause, resume and delete (submitter keys and up), refreshed while shown.

import { api, collect } from "../api.js";
import { h, notice, preview, shortId, sleep, time } from "../dom.js";

const REFRESH_MS = 5000;
const MOST = 500;

export async function schedulesView(main, { signal }) {
  const body = h("tbody");
  const problems = h("div");
  const more = h("p", { class: "muted" });
  main.replaceChildren(
    h("h1", { text: "Schedules" }), problems,
    h("table", { class: "list", id: "schedules" },
      h("thead", {}, h("tr", {}, ["Schedule", "Cron", "Time zone", "Submits", "Overlap", "Next", "Last", "Last task", ""].map((name) => h("th", { text: name })))),
      body),
    more,
  );

  const act = async (schedule, verb) => {
    try {
      const path = `/v1/schedules/${encodeURIComponent(schedule.id)}`;
      if (verb === "delete") await api(path, { method: "DELETE", signal });
      else await api(`${path}/${verb}`, { method: "POST", signal });
      problems.replaceChildren();
      await load();
    } catch (error) {
      problems.replaceChildren(notice(error.message, "error"));
    }
  };

  const row = (schedule) => h("tr", { dataset: { scheduleId: schedule.id, paused: String(schedule.paused) } },
    h("td", { class: "mono", title: schedule.id, text: shortId(schedule.id) }),
    h("td", { class: "mono", text: schedule.cron }),
    h("td", { text: schedule.timezone }),
    h("td", { class: "input-preview", text: `${schedule.task?.specialist ?? "routed"}: ${preview(schedule.task?.input)}` }),
    h("td", { text: schedule.overlap }),
    h("td", { text: schedule.paused ? "paused" : time(schedule.next_run_at) }),
    h("td", { text: schedule.last_run_at ? `${time(schedule.last_run_at)} (${(schedule.last_outcome ?? "").replace("_", " ")})` : "—" }),
    h("td", {}, schedule.last_task_id ? h("a", { href: `#/tasks/${schedule.last_task_id}`, class: "mono", text: shortId(schedule.last_task_id) }) : "—"),
    h("td", { class: "actions" },
      h("button", { type: "button", dataset: { action: schedule.paused ? "resume" : "pause" }, onclick: () => act(schedule, schedule.paused ? "resume" : "pause"), text: schedule.paused ? "Resume" : "Pause" }),
      h("button", { type: "button", class: "danger", dataset: { action: "delete" }, onclick: () => act(schedule, "delete"), text: "Delete" })),
  );

  const load = async () => {
    const [items, truncated] = await collect("/v1/schedules", {}, MOST, signal);
    body.replaceChildren(...items.map(row));
    if (!items.length) body.append(h("tr", {}, h("td", { colspan: 9, class: "muted", text: "No schedules." })));
    more.textContent = truncated ? `Showing the newest ${MOST}.` : "";
  };

  for (let first = true; !signal.aborted; first = false) {
    try {
      await load();
    } catch (error) {
      if (first || signal.aborted || error.status === 401) throw error;
    }
    await sleep(REFRESH_MS, signal);
  }
}
