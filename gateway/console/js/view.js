// A tiny DOM helper and the pieces every page shares.

// h("a", {href: "#/x", class: "c"}, "text", child, [more]): an element.
// Attributes whose value is null, undefined or false are left out; "on..."
// attributes are event listeners.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? "" : value);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

// Replaces an element's children.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

const pad = (n, width = 2) => String(n).padStart(width, "0");

// 2026-12-03 14:29:41.193, in the operator's zone.
const local = (d) => `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
  `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;

// The operator's zone, as the header says it: "UTC+01:00".
export function zone() {
  const offset = -new Date().getTimezoneOffset();
  return `UTC${offset < 0 ? "−" : "+"}${pad(Math.floor(Math.abs(offset) / 60))}:${pad(Math.abs(offset) % 60)}`;
}

// A time in the operator's zone; the UTC value on hover.
export function time(iso) {
  if (!iso) return h("span", { class: "muted" }, "—");
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return h("time", { datetime: iso, title: `${d.toISOString()} (UTC)` }, local(d));
}

export const number = (n) => (typeof n === "number" ? n.toLocaleString() : "—");

const TERMINAL = ["completed", "failed", "compensated"];
export const isTerminal = (state) => TERMINAL.includes(state);

export function stateBadge(state) {
  return h("span", { class: `badge state-${state}`, "data-state": state }, state.replaceAll("_", " "));
}

export const sagaLink = (id) => h("a", { href: `#/saga/${encodeURIComponent(id)}`, class: "mono" }, id);
export const accountLink = (id) => h("a", { href: `#/account/${encodeURIComponent(id)}`, class: "mono" }, id);

// An API error as the API states it: code, message and request id.
export function errorBox(error) {
  return h("div", { class: "error", role: "alert" },
    h("strong", {}, error.code ?? "error"), ": ", error.message,
    error.status ? h("span", { class: "muted" }, ` (HTTP ${error.status})`) : null,
    error.requestId ? h("span", { class: "muted" }, " — request ", h("code", {}, error.requestId)) : null);
}

export const notice = (text) => h("p", { class: "notice", role: "status" }, text);

// A semantic table: caption, column headers, one row per item.
// columns: [{label, cell: item => node or text, num?: true}]
export function table(caption, columns, items, empty = "None.") {
  if (!items.length) return h("p", { class: "muted" }, `${caption}: ${empty}`);
  return h("div", { class: "scroll" }, h("table", {},
    h("caption", {}, caption),
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col", class: c.num ? "num" : null }, c.label)))),
    h("tbody", {}, items.map((item) =>
      h("tr", {}, columns.map((c) => h("td", { class: c.num ? "num" : null }, c.cell(item))))))));
}

// A definition list from [label, value] pairs.
export const facts = (pairs) => h("dl", { class: "facts" },
  pairs.map(([label, value]) => h("div", {}, h("dt", {}, label), h("dd", {}, value))));

export const json = (value) => h("pre", { class: "json" }, JSON.stringify(value, null, 2));

// Asks before an action: resolves true when the operator confirms. The
// dialog is modal (focus stays in it; Escape cancels) and says what will happen.
export function confirmAction(title, text, okLabel) {
  const dialog = document.getElementById("confirm");
  fill(document.getElementById("confirm-title"), title);
  fill(document.getElementById("confirm-text"), text);
  fill(document.getElementById("confirm-ok"), okLabel);
  dialog.returnValue = "";
  dialog.showModal();
  document.getElementById("confirm-cancel").focus();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
  });
}

// The page heading; focused when a page opens so that screen readers and
// keyboard users start there.
export function pageTitle(text, ...extra) {
  document.title = `${text} — Tally console`;
  return h("h1", { tabindex: "-1" }, text, ...extra);
}
