// Reconciliation: the frozen accounts (with Unfreeze), and per shard its
// last reports (with their classes of differences), a "Run now" (the
// accounts written since the last run) and a "Full run" (every account).
import { act, enc, get } from "../api.js";
import { accountLink, confirmAction, errorBox, facts, fill, h, json, notice, number, pageTitle, table,
         time } from "../view.js";

const classes = (c) => {
  const entries = Object.entries(c ?? {});
  if (!entries.length) return "none";
  return h("ul", { class: "plain" }, entries.map(([name, n]) => h("li", {}, `${name}: ${n}`)));
};

const reportsTable = (shard, reports) => table(`Last reports of shard ${shard.name}, newest first`, [
  { label: "Ran at", cell: (r) => time(r.ran_at) },
  { label: "Mode", cell: (r) => (r.mode === "incremental" ? `incremental since ${r.since}` : r.mode) },
  { label: "Watermark", cell: (r) => r.watermark, num: true },
  { label: "Differences", cell: (r) => number(r.differences), num: true },
  { label: "Classes", cell: (r) => classes(r.classes) },
  { label: "Frozen",
    cell: (r) => (r.frozen.length ? r.frozen.map((id, i) => [i ? ", " : "", accountLink(id)]) : "none") },
  { label: "Report", cell: (r) => h("details", {}, h("summary", {}, `report ${r.report_id}`), json(r.report)) },
], reports, "no run recorded yet.");

export async function mount(view) {
  const frozenArea = h("div");
  const outcome = h("div");
  const shardsArea = h("div");
  view.append(pageTitle("Reconciliation"), outcome,
              h("section", { "aria-labelledby": "frozen-title" },
                h("h2", { id: "frozen-title" }, "Frozen accounts"), frozenArea),
              shardsArea);

  async function loadFrozen() {
    try {
      const { accounts } = await get("/v1/admin/accounts", { status: "frozen" });
      fill(frozenArea, table("Accounts whose writes are refused", [
        { label: "Account", cell: (a) => accountLink(a.account_id) },
        { label: "Shard", cell: (a) => a.shard, num: true },
        { label: "Balance", cell: (a) => number(a.balance), num: true },
        { label: "Held", cell: (a) => number(a.held), num: true },
        { label: "Updated", cell: (a) => time(a.updated_at) },
        { label: "Action", cell: (a) => h("button", { type: "button", onclick: () => unfreeze(a) },
          "Unfreeze ", h("span", { class: "sr-only" }, a.account_id)) },
      ], accounts, "no account is frozen."));
    } catch (error) {
      fill(frozenArea, errorBox(error));
    }
  }

  async function unfreeze(account) {
    const ok = await confirmAction(`Unfreeze ${account.account_id}?`,
      `Unfreeze account ${account.account_id} on shard ${account.shard}: writes to it are accepted again. ` +
      "Do it once its difference is understood (the shard's last report says which class it was).", "Unfreeze account");
    if (!ok) return;
    try {
      await act(`/v1/admin/accounts/${enc(account.account_id)}/unfreeze`);
      fill(outcome, notice(`${account.account_id} is unfrozen.`));
    } catch (error) {
      fill(outcome, errorBox(error));
    }
    loadFrozen();
  }

  function shardSection(shard) {
    const reports = h("div");
    const load = async () => {
      try {
        const { reports: runs } = await get("/v1/admin/reconciliation/reports", { shard: shard.shard });
        fill(reports, reportsTable(shard, runs));
      } catch (error) {
        fill(reports, errorBox(error));
      }
    };
    const run = async (mode) => {
      const which = mode === "full"
        ? "every account of this tenant on it is compared with its whole ledger (a change made by hand included)"
        : "the accounts of this tenant written since the last run, those with open holds and those that differed " +
          "last time are compared with their ledger from their last clean check";
      const ok = await confirmAction(`Run ${mode} reconciliation on shard ${shard.name}?`,
        `Reconcile shard ${shard.name} now: ${which}, at a watermark. Every account with a difference is FROZEN: ` +
        "its writes are refused until an operator unfreezes it.", "Run and freeze differences");
      if (!ok) return;
      try {
        const r = await get("/v1/admin/reconciliation", { shard: shard.shard, mode });
        fill(outcome, notice(`Shard ${shard.name} (${mode}): ${r.accounts} accounts at watermark ${r.watermark}, ` +
          `${r.differences} difference(s), ${r.frozen.length} account(s) frozen.`));
      } catch (error) {
        fill(outcome, errorBox(error));
      }
      load();
      loadFrozen();
    };
    const title = `shard-${shard.shard}-title`;
    return [h("section", { "aria-labelledby": title },
      h("h2", { id: title }, `Shard ${shard.name}`, h("span", { class: "muted" }, ` (number ${shard.shard})`)),
      facts([["Health", shard.health], ["Writer", shard.leader ? "yes" : "no"], ["Epoch", shard.epoch],
             ["Outbox not yet delivered", number(shard.outbox?.undelivered)]]),
      h("button", { type: "button", onclick: () => run("incremental") }, "Run now on ", shard.name), " ",
      h("button", { type: "button", onclick: () => run("full") }, "Full run on ", shard.name), reports), load];
  }

  const [shards] = await Promise.all([get("/v1/admin/shards").catch((error) => error), loadFrozen()]);
  if (shards instanceof Error) {
    fill(shardsArea, errorBox(shards));
    return;
  }
  const sections = shards.shards.map(shardSection);
  fill(shardsArea, sections.map(([section]) => section));
  await Promise.all(sections.map(([, load]) => load()));
}
