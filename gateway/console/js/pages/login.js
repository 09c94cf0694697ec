// Sign-in: the operator pastes an operator key once. It is checked with a
// cheap operator call before it is kept.
import { call, session } from "../api.js";
import { errorBox, h, pageTitle } from "../view.js";

let signedIn = () => {};
export function onSignedIn(handler) { signedIn = handler; }

// Why the last key was refused, shown on the next sign-in form.
let lastRefusal = null;
export function refused(error) { lastRefusal = error; }

function explain(error) {
  if (error.status === 401)
    return "This key was refused: it is not a key of this gateway, or it was revoked. Paste an operator key.";
  if (error.status === 403)
    return "This key may not use the operator endpoints: it is an app key. The console needs an operator key.";
  return "The key could not be checked.";
}

function refusal(error) {
  return h("div", { class: "refusal" }, h("p", {}, explain(error)), errorBox(error));
}

export function mount(view) {
  document.title = "Sign in — Tally console";
  const message = h("div", { id: "login-message" }, lastRefusal ? refusal(lastRefusal) : null);
  lastRefusal = null;
  const input = h("input", { id: "key", name: "key", type: "password", required: true, autocomplete: "off",
                             spellcheck: "false", "aria-describedby": "key-help" });
  const button = h("button", { type: "submit" }, "Sign in");
  const form = h("form", { class: "login", onsubmit: submit },
    h("label", { for: "key" }, "Operator key"), input,
    h("p", { id: "key-help", class: "muted" },
      "Kept in this tab only (sessionStorage) and sent as an Authorization header; closing the tab forgets it."),
    button);

  async function submit(event) {
    event.preventDefault();
    const key = input.value.trim();
    button.disabled = true;
    message.replaceChildren(h("p", { role: "status" }, "Checking the key…"));
    try {
      await call("GET", "/v1/admin/sagas", { query: { limit: 1 }, key });
      session.set(key);
      signedIn();  // on to the page in the address, or the sagas
    } catch (error) {
      message.replaceChildren(refusal(error));
      button.disabled = false;
      input.select();
    }
  }

  view.append(pageTitle("Sign in"), message, form);
  input.focus();
}
