// Reconciliation: the frozen accounts (with Unfreeze), and per shard its
// last reports (with their classes of differences), a "Run now" (the
// accounts written since the last run), a "Full run" (every account, in one
// request) and full audits (every account, in the background: started
// here, their progress read every second while one runs, cancellable).
import { act, call, enc, get } from "../api.js";
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

const AUDIT_POLL_MS = 1000;

const auditProgress = (a) =>
  `${number(a.accounts_checked)} of ${number(a.accounts_total)} (${(a.progress * 100).toFixed(1)} %)`;

export async function mount(view) {
  let stopped = false;
  const timers = new Set();
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
    const audits = h("div");
    let polling = null;
    const loadAudits = async () => {
      let running = false;
      try {
        const { audits: list } = await get("/v1/admin/audits", { shard: shard.shard });
        running = list.some((a) => a.state === "running");
        fill(audits, table(`Full audits of shard ${shard.name}, newest first`, [
          { label: "Audit", cell: (a) => a.audit_id, num: true },
          { label: "State", cell: (a) => a.state },
          { label: "Checked", cell: auditProgress },
          { label: "Differences", cell: (a) => number(a.differences), num: true },
          { label: "Classes", cell: (a) => classes(a.classes) },
          { label: "Started", cell: (a) => time(a.started_at) },
          { label: "Action", cell: (a) => (a.state === "running"
            ? h("button", { type: "button", onclick: () => cancelAudit(a) }, "Cancel audit ", a.audit_id)
            : h("details", {}, h("summary", {}, `audit ${a.audit_id}`), json(a))) },
        ], list, "no audit yet."));
      } catch (error) {
        fill(audits, errorBox(error));
      }
      // Read again while one runs, until the page is left.
      if (running && !stopped && !polling) {
        polling = setTimeout(() => {
          timers.delete(polling);
          polling = null;
          loadAudits();
        }, AUDIT_POLL_MS);
        timers.add(polling);
      } else if (!running) {
        loadFrozen();
      }
    };
    const startAudit = async () => {
      const ok = await confirmAction(`Start a full audit of shard ${shard.name}?`,
        `Audit shard ${shard.name} in the background: every account of this tenant on it is compared with its whole ` +
        "ledger, a page of accounts at a time, while writes go on. Every account with a difference is FROZEN: its " +
        "writes are refused until an operator unfreezes it.", "Start audit");
      if (!ok) return;
      try {
        const a = await call("POST", "/v1/admin/audits", { body: {}, query: { shard: shard.shard } });
        fill(outcome, notice(`Shard ${shard.name}: audit ${a.audit_id} started over ${number(a.accounts_total)} ` +
          "accounts."));
      } catch (error) {
        fill(outcome, errorBox(error));
      }
      loadAudits();
    };
    const cancelAudit = async (a) => {
      const ok = await confirmAction(`Cancel audit ${a.audit_id}?`,
        `Stop audit ${a.audit_id} of shard ${shard.name} after the page under way: the accounts after it stay ` +
        "unchecked.", "Cancel audit");
      if (!ok) return;
      try {
        const after = await call("POST", `/v1/admin/audits/${enc(a.audit_id)}/cancel`,
                                 { body: {}, query: { shard: shard.shard } });
        fill(outcome, notice(`Audit ${after.audit_id} is ${after.state}.`));
      } catch (error) {
        fill(outcome, errorBox(error));
      }
      loadAudits();
    };
    const title = `shard-${shard.shard}-title`;
    return [h("section", { "aria-labelledby": title },
      h("h2", { id: title }, `Shard ${shard.name}`, h("span", { class: "muted" }, ` (number ${shard.shard})`)),
      facts([["Health", shard.health], ["Writer", shard.leader ? "yes" : "no"], ["Epoch", shard.epoch],
             ["Outbox not yet delivered", number(shard.outbox?.undelivered)]]),
      h("button", { type: "button", onclick: () => run("incremental") }, "Run now on ", shard.name), " ",
      h("button", { type: "button", onclick: () => run("full") }, "Full run on ", shard.name), " ",
      h("button", { type: "button", onclick: startAudit }, "Start full audit on ", shard.name), reports, audits),
    () => Promise.all([load(), loadAudits()])];
  }

  const stop = () => {
    stopped = true;
    for (const t of timers) clearTimeout(t);
  };
  const [shards] = await Promise.all([get("/v1/admin/shards").catch((error) => error), loadFrozen()]);
  if (shards instanceof Error) {
    fill(shardsArea, errorBox(shards));
    return stop;
  }
  const sections = shards.shards.map(shardSection);
  fill(shardsArea, sections.map(([section]) => section));
  await Promise.all(sections.map(([, load]) => load()));
  return stop;
}
