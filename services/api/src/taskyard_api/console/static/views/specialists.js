// The catalog, with what the API lets the console count per specialist: tasks queued and running (from
// the task list, at most 200 each), and open dead letters (admin keys). Queue depths and consumer counts
// come from RabbitMQ, which the API does not expose yet.

import { ApiError, api } from "../api.js";
import { h } from "../dom.js";

const MOST = 200;

export async function specialistsView(main, { signal }) {
  const { items } = await api("/v1/specialists", { signal });
  const cells = new Map();
  const count = (name, kind) => {
    const cell = h("td", { class: "num", dataset: { count: kind }, text: "…" });
    cells.set(`${name}/${kind}`, cell);
    return cell;
  };
  main.replaceChildren(
    h("h1", { text: "Specialists" }),
    h("table", { class: "list", id: "specialists" },
      h("thead", {}, h("tr", {}, ["Name", "Description", "Model", "Tools", "Steps", "Timeout", "Concurrency", "Queued", "Running", "Dead letters"].map((name) => h("th", { text: name })))),
      h("tbody", {}, items.map((spec) => h("tr", { dataset: { specialist: spec.name } },
        h("td", { class: "strong", text: spec.name }),
        h("td", { class: "description", text: spec.description }),
        h("td", { text: spec.model ?? "default" }),
        h("td", { text: spec.tools.join(", ") || "—" }),
        h("td", { class: "num", text: spec.max_steps }),
        h("td", { class: "num", title: `a task may ask for up to ${spec.max_timeout_seconds} s`, text: `${spec.timeout_seconds} s` }),
        h("td", { class: "num", text: spec.concurrency }),
        count(spec.name, "queued"), count(spec.name, "running"), count(spec.name, "dead-letters"))))),
    h("p", { class: "muted", text: `Queued and running are counted from the task store (${MOST}+ means at least that many). Queue depths and consumer counts are RabbitMQ's and not exposed by the API yet.` }),
  );
  const jobs = items.flatMap((spec) => [
    fill(cells.get(`${spec.name}/queued`), "/v1/tasks", { status: "queued", specialist: spec.name }, signal),
    fill(cells.get(`${spec.name}/running`), "/v1/tasks", { status: "running", specialist: spec.name }, signal),
    fill(cells.get(`${spec.name}/dead-letters`), "/v1/dead-letters", { specialist: spec.name }, signal),
  ]);
  await Promise.all(jobs);
}

async function fill(cell, path, params, signal) {
  try {
    const page = await api(path, { params: { ...params, limit: MOST }, signal });
    cell.textContent = `${page.items.length}${page.next_cursor ? "+" : ""}`;
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    cell.textContent = "—";
    cell.title = error.status === 403 ? "needs an admin key" : error.message;
  }
}
