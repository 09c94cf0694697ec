// One account: balance, held, available, next expiry; its lots; its ledger
// entries page by page, and the sagas behind them. Followed live: an
// account message redraws the figures and re-reads the lots and entries.
import { enc, get } from "../api.js";
import { paged } from "../paged.js";
import { follow, liveBadge } from "../stream.js";
import { errorBox, facts, fill, h, number, pageTitle, sagaLink, stateBadge, table, time } from "../view.js";

const PAGE = 50;
const isSaga = (id) => /^sg_[0-9A-Z]{26}$/.test(id);

function figures(account) {
  return facts([
    ["Balance", h("span", { class: "figure", id: "balance", "data-value": account.balance }, number(account.balance))],
    ["Held", h("span", { class: "figure", id: "held" }, number(account.held))],
    ["Available", h("span", { class: "figure", id: "available" }, number(account.available))],
    ["Next expiry", account.next_expiry
      ? h("span", {}, number(account.next_expiry.amount), " at ", time(account.next_expiry.at)) : "nothing expires"],
    ["Status", stateBadge(account.status)],
    ["Version", account.version],
    ["Updated", time(account.updated_at)],
  ]);
}

const lotsTable = (lots) => table("Lots, in the order value is taken from them", [
  { label: "Lot", cell: (l) => l.lot_id, num: true },
  { label: "Origin", cell: (l) => l.origin },
  { label: "State", cell: (l) => l.state },
  { label: "Granted", cell: (l) => number(l.granted), num: true },
  { label: "Remaining", cell: (l) => number(l.remaining), num: true },
  { label: "Held", cell: (l) => number(l.held), num: true },
  { label: "Expired", cell: (l) => number(l.expired), num: true },
  { label: "Expires", cell: (l) => (l.expires_at ? time(l.expires_at) : "never") },
  { label: "Rule version", cell: (l) => l.rule_version },
  { label: "Granted at", cell: (l) => time(l.created_at) },
], lots);

function entriesTable(entries) {
  const sagas = new Map();
  for (const e of entries) if (isSaga(e.biz_id)) sagas.set(e.biz_id, [...(sagas.get(e.biz_id) ?? []), e.biz_type]);
  return h("div", {},
    table("Ledger entries, oldest first", [
      { label: "Seq", cell: (e) => e.seq, num: true },
      { label: "Type", cell: (e) => e.biz_type },
      { label: "biz_id",
        cell: (e) => (isSaga(e.biz_id) ? sagaLink(e.biz_id) : h("span", { class: "mono" }, e.biz_id)) },
      { label: "Delta", cell: (e) => (e.delta > 0 ? "+" : "") + number(e.delta), num: true },
      { label: "Balance after", cell: (e) => number(e.balance_after), num: true },
      { label: "At", cell: (e) => time(e.created_at) },
    ], entries),
    h("h3", {}, "Sagas behind these entries"),
    sagas.size
      ? h("ul", { class: "links" },
        [...sagas].map(([id, types]) => h("li", {}, sagaLink(id), ` (${types.join(", ")})`)))
      : h("p", { class: "muted" }, "None."));
}

export async function mount(view, [id]) {
  const base = `/v1/accounts/${enc(id)}`;
  const live = liveBadge();
  const problem = h("div");
  const summary = h("section", { "aria-label": "Figures" });
  const lots = paged("lots", (after) => get(`${base}/lots`, { state: "all", limit: PAGE, after })
    .then((r) => ({ items: r.lots, next: r.next })), lotsTable);
  const entries = paged("entries", (after) => get(`${base}/entries`, { limit: PAGE, after })
    .then((r) => ({ items: r.entries, next: r.next })), entriesTable);
  view.append(pageTitle("Account ", h("span", { class: "mono" }, id)), problem, summary);

  let version = -1;
  const show = (account) => {
    if (account.version < version) return;  // an older state, arriving late
    version = account.version;
    fill(summary, figures(account));
  };
  try {
    show(await get(base, { consistency: "strong" }));
  } catch (error) {
    fill(problem, errorBox(error));
    return undefined;
  }
  summary.before(live.el);
  view.append(h("h2", {}, "Lots"), lots.el, h("h2", {}, "Ledger"), entries.el);
  await Promise.all([lots.reload(), entries.reload()]);
  return follow({ accounts: [id] }, (message) => {
    if (message.type === "account" && message.account.account_id === id) {
      show(message.account);
      lots.reload();
      entries.reload();
    } else if (message.type === "error") {
      fill(problem, errorBox(message.error));
    }
  }, live.update);
}
