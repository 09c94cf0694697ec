// The console's shell: hash routes to pages, the sign-in state, the header.
// A page module exports mount(view, params, query), which renders into view
// and may return a function that stops what the page started (timers,
// streams) when the operator leaves it.
import { session, whenKeyRefused } from "./api.js";
import { errorBox, zone } from "./view.js";
import * as login from "./pages/login.js";
import * as sagas from "./pages/sagas.js";
import * as saga from "./pages/saga.js";
import * as account from "./pages/account.js";
import * as reconciliation from "./pages/reconciliation.js";
import * as health from "./pages/health.js";

const routes = [
  [/^\/sagas$/, sagas],
  [/^\/saga\/([^/]+)$/, saga],
  [/^\/account\/([^/]+)$/, account],
  [/^\/reconciliation$/, reconciliation],
  [/^\/health$/, health],
];

const main = document.getElementById("main");
let leave = null;

function signedIn(yes) {
  for (const id of ["nav", "goto", "sign-out"]) document.getElementById(id).hidden = !yes;
}

async function route() {
  leave?.();
  leave = null;
  const [path, search = ""] = location.hash.replace(/^#/, "").split("?");
  const query = new URLSearchParams(search);
  if (!session.key()) {
    signedIn(false);
    const view = document.createElement("div");
    main.replaceChildren(view);
    login.mount(view);
    return;
  }
  signedIn(true);
  const found = routes.map(([re, page]) => [path.match(re), page]).find(([m]) => m);
  if (!found) {
    location.replace("#/sagas");
    return;
  }
  const [match, page] = found;
  for (const a of document.querySelectorAll("#nav a")) {
    if (path.startsWith(a.getAttribute("href").slice(1))) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  // Each visit renders into its own element: a page still loading when the
  // operator moves on writes into a detached element, then is stopped.
  const view = document.createElement("div");
  main.replaceChildren(view);
  let stop;
  try {
    stop = await page.mount(view, match.slice(1).map(decodeURIComponent), query);
  } catch (error) {
    view.append(errorBox(error));  // a page shows the API's errors itself; this is anything else
  }
  if (!view.isConnected) {
    stop?.();
    return;
  }
  leave = stop ?? null;
  view.querySelector("h1")?.focus();
}

whenKeyRefused((error) => {
  if (!session.key()) return;  // the sign-in form checks keys itself
  session.clear();
  login.refused(error);
  route();
});

document.getElementById("sign-out").addEventListener("click", () => {
  session.clear();
  location.hash = "#/sagas";
  route();
});

document.getElementById("goto").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = event.target.elements.id;
  const id = input.value.trim();
  location.hash = id.startsWith("sg_") ? `#/saga/${encodeURIComponent(id)}` : `#/account/${encodeURIComponent(id)}`;
  input.value = "";
});

document.getElementById("zone").textContent = `Times in your zone (${zone()}); hover one for UTC.`;
window.addEventListener("hashchange", route);
login.onSignedIn(route);
route();
