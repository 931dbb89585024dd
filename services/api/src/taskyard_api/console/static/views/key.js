// The API key form. The key is read in script and kept in this tab's sessionStorage: the form has no
// action and its field no name, and the page's policy forbids form submission, so it can never end up in
// a URL.

import { h } from "../dom.js";

export function keyForm(reason, onKey) {
  const field = h("input", { type: "password", id: "api-key", autocomplete: "off", spellcheck: "false", required: true, placeholder: "tyk_…" });
  const form = h("form", { class: "card key-form", onsubmit: (event) => {
    event.preventDefault();
    const key = field.value.trim();
    if (key) onKey(key);
  } },
    h("h1", { text: "API key" }),
    h("p", { text: reason }),
    h("label", { for: "api-key", text: "Key" }),
    field,
    h("p", { class: "muted", text: "Kept in this browser tab only (session storage) and sent as an Authorization header. Dead letters need an admin key." }),
    h("button", { type: "submit", text: "Use this key" }),
  );
  queueMicrotask(() => field.focus());
  return form;
}
