// The console's shell: a hash router (#/tasks, #/tasks/<id>, #/groups/<id>, #/schedules, #/dead-letters,
// #/specialists), the header's
// key indicator, and the key form whenever the API answers 401. Each view gets an AbortSignal that fires
// when the operator leaves it, which stops its timers and streams.

import { ApiError, auth } from "./api.js";
import { h, notice } from "./dom.js";
import { keyForm } from "./views/key.js";
import { deadLettersView } from "./views/dead_letters.js";
import { groupView } from "./views/group.js";
import { schedulesView } from "./views/schedules.js";
import { specialistsView } from "./views/specialists.js";
import { taskView } from "./views/task.js";
import { tasksView } from "./views/tasks.js";

const ROUTES = [
  [/^#\/tasks\/([0-9a-fA-F-]{36})$/, "tasks", taskView],
  [/^#\/tasks$/, "tasks", tasksView],
  [/^#\/groups\/([0-9a-fA-F-]{36})$/, "tasks", groupView],
  [/^#\/schedules$/, "schedules", schedulesView],
  [/^#\/dead-letters$/, "dead-letters", deadLettersView],
  [/^#\/specialists$/, "specialists", specialistsView],
];

const main = document.getElementById("view");
let controller = null;

function showAuth() {
  const slot = document.getElementById("auth");
  const key = auth.key();
  if (!key) {
    slot.replaceChildren(h("span", { class: "muted", text: "no API key" }));
    return;
  }
  slot.replaceChildren(
    h("span", { class: "muted", text: `key …${key.slice(-4)}` }),
    h("button", { type: "button", class: "link", onclick: () => { auth.forget(); showAuth(); render(); }, text: "Forget key" }),
  );
}

function askForKey(reason) {
  controller?.abort();
  controller = new AbortController();
  main.replaceChildren(keyForm(reason, (key) => { auth.set(key); showAuth(); render(); }));
}

async function render() {
  controller?.abort();
  controller = new AbortController();
  const { signal } = controller;
  const path = location.hash.split("?")[0] || "#/tasks";
  const route = ROUTES.find(([pattern]) => pattern.test(path));
  for (const link of document.querySelectorAll("[data-nav]")) {
    link.classList.toggle("current", route?.[1] === link.dataset.nav);
  }
  if (!route) {
    main.replaceChildren(notice("No such page.", "error"), h("p", {}, h("a", { href: "#/tasks", text: "Tasks" })));
    return;
  }
  const [pattern, , view] = route;
  main.replaceChildren(h("p", { class: "muted", text: "Loading…" }));
  try {
    await view(main, { match: pattern.exec(path), signal });
  } catch (error) {
    if (signal.aborted) return;
    if (error instanceof ApiError && error.status === 401) return; // the key form is showing
    main.replaceChildren(notice(error instanceof ApiError ? error.message : `Something went wrong: ${error}`, "error"));
  }
}

window.addEventListener("taskyard:unauthorized", () => {
  askForKey(auth.key() ? "The API refused this key (unknown, revoked or mistyped)." : "This API needs an API key.");
});
window.addEventListener("hashchange", render);
if (!location.hash) history.replaceState(null, "", "#/tasks");
showAuth();
render();
