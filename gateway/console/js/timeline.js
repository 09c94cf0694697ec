// A saga's attempts as a table grouped by step, each with a bar on a
// timeline from the saga's creation to its last known moment; and the
// saga's workflow definition (GET /v1/admin/workflows, read once).
import { get } from "./api.js";
import { h, json, time } from "./view.js";

let workflows = null;

// The definition a saga runs: its type's workflow with the same steps.
export async function workflowOf(saga) {
  workflows ??= get("/v1/admin/workflows").then((r) => r.workflows).catch((e) => { workflows = null; throw e; });
  const names = saga.steps.map((s) => s.name).join(",");
  return (await workflows).find((w) => w.type === saga.type && w.steps.map((s) => s.name).join(",") === names) ?? null;
}

const ms = (iso) => (iso ? new Date(iso).getTime() : null);

function bar(attempt, start, span) {
  const sent = ms(attempt.sent_at);
  const answered = ms(attempt.answered_at);
  const left = ((sent - start) / span) * 100;
  const width = answered ? Math.max(((answered - sent) / span) * 100, 0.5) : 0.5;
  return h("div", { class: "track", "aria-hidden": "true" },
    h("div", { class: `bar outcome-${attempt.outcome ?? "none"}${answered ? "" : " open"}`,
               style: `left: ${Math.min(left, 99.5).toFixed(2)}%; width: ${width.toFixed(2)}%` }));
}

export function attemptsTable(saga, attempts, caption) {
  const times = [saga.created_at, saga.updated_at, ...attempts.flatMap((a) => [a.sent_at, a.answered_at])]
    .map(ms).filter((t) => t !== null);
  const start = Math.min(...times);
  const span = Math.max(Math.max(...times) - start, 1);
  const steps = [...new Set(attempts.map((a) => a.step))];
  const cols = ["Attempt", "Account", "Shard", "Call", "Outcome", "Code", "Sent", "Answered", "Took (ms)", "Timeline"];
  return h("div", { class: "scroll" }, h("table", { class: "attempts" },
    h("caption", {}, caption,
      h("span", { class: "muted" }, ` — the timeline spans ${(span / 1000).toFixed(3)} s from the saga's creation`)),
    h("thead", {}, h("tr", {}, cols.map((c) => h("th", { scope: "col", class: c === "Took (ms)" ? "num" : null }, c)))),
    steps.map((step) => h("tbody", {},
      h("tr", { class: "group" }, h("th", { scope: "rowgroup", colspan: cols.length }, step)),
      attempts.filter((a) => a.step === step).map((a) => h("tr", {},
        h("td", { class: "num" }, a.attempt),
        h("td", { class: "mono" }, a.request?.account_id ?? `item ${a.item}`),
        h("td", {}, a.shard),
        h("td", {}, h("details", {}, h("summary", {}, a.request?.type ?? "request"), json(a.request))),
        h("td", {}, h("span", { class: `badge outcome-${a.outcome ?? "none"}` }, a.outcome ?? "no answer")),
        h("td", {}, a.code ?? ""),
        h("td", {}, time(a.sent_at)),
        h("td", {}, time(a.answered_at)),
        h("td", { class: "num" }, a.answered_at ? ms(a.answered_at) - ms(a.sent_at) : "—"),
        h("td", { class: "timeline" }, bar(a, start, span))))))));
}
