// One saga: its input, steps, every attempt of every step on a timeline,
// compensations, and the operator's Retry and Abort. Followed live: each
// stream message about the saga re-reads the operator's view.
import { act, enc, get } from "../api.js";
import { follow, liveBadge } from "../stream.js";
import { accountLink, confirmAction, errorBox, facts, fill, h, isTerminal, json, notice, number, pageTitle, sagaLink,
         stateBadge, table, time } from "../view.js";
import { attemptsTable, workflowOf } from "../timeline.js";

const accountsOf = (saga, step) =>
  [...new Set(saga.history.filter((a) => a.step === step && !a.compensation).map((a) => a.request?.account_id))]
    .filter(Boolean);

const UNDO = {
  release: (accounts) => `release the hold on ${accounts}`,
  cancel_key: (accounts, command) => `cancel the ${command} on ${accounts} if it took effect`,
};

// What an abort will do, in words: undo every step taken, newest first.
function abortText(saga, workflow) {
  const taken = saga.steps.filter((s) => accountsOf(saga, s.name).length).reverse();
  const undo = taken.map((s) => {
    const accounts = accountsOf(saga, s.name).join(", ");
    const def = workflow?.steps.find((d) => d.name === s.name);
    if (UNDO[def?.compensation]) return UNDO[def.compensation](accounts, def.command);
    return def?.compensation === "none" ? `${s.name} on ${accounts} has no undo` : `undo ${s.name} on ${accounts}`;
  });
  const what = undo.length ? `compensate every step already taken (${undo.join("; then ")})`
                           : "no call was sent yet, so nothing needs undoing";
  return `Abort ${saga.type} ${saga.saga_id}: ${what}. It ends compensated with the error "aborted".`;
}

function retryText(saga) {
  return `Retry ${saga.type} ${saga.saga_id}: re-send now every call that is waiting (${waitingOn(saga)}), ` +
    "with the same keys, so nothing is applied twice.";
}

// The steps still at work and why their last call failed, if it did.
function waitingOn(saga) {
  const steps = saga.steps.filter((s) => ["running", "compensating"].includes(s.state));
  if (!steps.length) return saga.state === "awaiting_confirmation" ? "the app's confirm or cancel" : "—";
  return steps.map((s) => `${s.name} (${s.state === "compensating" ? "undo, " : ""}${s.attempts} attempts` +
    `${s.error ? `, last: ${s.error.code}` : ""})`).join("; ");
}

function pivotPassed(saga, workflow) {
  const pivot = workflow?.steps.find((st) => st.pivot);
  const step = pivot && saga.steps.find((s) => s.name === pivot.name);
  return step?.state === "succeeded" ? pivot.name : null;
}

const errorText = (e) => h("span", {}, h("strong", {}, e.code), ": ", e.message);

function inputValue(name, value) {
  if (name === "items")
    return h("ul", { class: "plain" },
      value.map((i) => h("li", {}, accountLink(i.account_id), `: ${number(i.amount)}`)));
  if (name.endsWith("account") || name === "account_id") return accountLink(value);
  if (name === "original_saga_id") return sagaLink(value);
  if (name.endsWith("_at")) return time(value);
  return typeof value === "object" ? json(value) : String(value);
}

export async function mount(view, [id]) {
  const live = liveBadge();
  const state = h("span");
  const announce = h("p", { class: "sr-only", "aria-live": "polite" });
  const problem = h("div");  // the last read's error, if it failed
  const outcome = h("div");  // what the last action answered
  const body = h("div");
  const retry = h("button", { type: "button", onclick: () => run("retry") }, "Retry");
  const abort = h("button", { type: "button", class: "danger", onclick: () => run("abort") }, "Abort");
  const why = h("p", { class: "muted", id: "actions-help" });
  const actions = h("section", { class: "actions", "aria-label": "Actions" }, retry, abort, why);
  abort.setAttribute("aria-describedby", "actions-help");
  view.append(pageTitle("Saga ", h("span", { class: "mono" }, id), " ", state), live.el, problem, actions, outcome,
              announce, body);

  let saga = null;
  let workflow = null;

  function render() {
    fill(state, stateBadge(saga.state));
    const done = isTerminal(saga.state);
    const passed = pivotPassed(saga, workflow);
    retry.disabled = done;
    abort.disabled = done || Boolean(passed);
    fill(why, done ? `The saga is ${saga.state}: nothing to retry or abort.`
      : passed ? `Past its pivot (${passed} succeeded): it only goes forward, so it cannot be aborted; ` +
        "Retry re-drives it."
      : `Before its pivot: Abort undoes what was done; Retry re-sends what is waiting.`);
    const compensations = saga.history.filter((a) => a.compensation);
    fill(body,
      facts([
        ["Type", `${saga.type}${workflow ? ` (workflow ${workflow.name})` : ""}`],
        ["biz_id", h("span", { class: "mono" }, saga.biz_id)],
        ["Created", time(saga.created_at)],
        ["Updated", time(saga.updated_at)],
        ["Deadline", time(saga.deadline)],
        ["Error", saga.error ? errorText(saga.error) : "none"],
        done ? null : ["Waiting on", waitingOn(saga)],
      ].filter(Boolean)),
      h("h2", {}, "Input"), facts(Object.entries(saga.input).map(([k, v]) => [k, inputValue(k, v)])),
      saga.refunded ? [h("h2", {}, "Refunded"), facts([["In all", number(saga.refunded.amount)],
        ...saga.refunded.items.map((i) => [h("span", {}, "to ", accountLink(i.account_id)), number(i.amount)])])]
        : null,
      h("h2", {}, "Steps"),
      table("Steps, in order", [
        { label: "Step", cell: (s) => [s.name, " ", workflow?.steps.find((st) => st.name === s.name)?.pivot
          ? h("span", { class: "badge pivot", title: "The pivot: past it the saga only goes forward" }, "pivot")
          : null] },
        { label: "State", cell: (s) => stateBadge(s.state) },
        { label: "Attempts", cell: (s) => s.attempts, num: true },
        { label: "Started", cell: (s) => time(s.started_at) },
        { label: "Finished", cell: (s) => time(s.finished_at) },
        { label: "Error", cell: (s) => (s.error ? errorText(s.error) : "") },
      ], saga.steps),
      h("h2", {}, "Attempts"),
      attemptsTable(saga, saga.history.filter((a) => !a.compensation), "Every attempt of every step, on a timeline"),
      h("h2", {}, "Compensations"),
      compensations.length
        ? attemptsTable(saga, compensations, "Undo calls (compensations)")
        : h("p", { class: "muted" }, "No step was compensated."));
  }

  async function load() {
    try {
      const next = await get(`/v1/admin/sagas/${enc(id)}`);
      workflow ??= await workflowOf(next).catch(() => null);  // without it: no pivot marks, a plainer abort text
      fill(problem);
      if (JSON.stringify(next) === JSON.stringify(saga)) return;  // keep the operator's place (focus, open details)
      if (saga && saga.state !== next.state) announce.textContent = `State: ${next.state.replaceAll("_", " ")}`;
      saga = next;
      render();
    } catch (error) {
      fill(problem, errorBox(error));
    }
  }

  // Stream messages may come faster than reads: one read at a time, and one
  // more after it when something arrived meanwhile.
  let reading = false;
  let again = false;
  async function reload() {
    if (reading) {
      again = true;
      return;
    }
    reading = true;
    do {
      again = false;
      await load();
    } while (again);
    reading = false;
  }

  async function run(action) {
    const text = action === "abort" ? abortText(saga, workflow) : retryText(saga);
    const ok = await confirmAction(action === "abort" ? "Abort this saga?" : "Retry this saga now?", text,
                                   action === "abort" ? "Abort saga" : "Retry saga");
    (action === "abort" ? abort : retry).focus();
    if (!ok) return;
    try {
      const after = await act(`/v1/admin/sagas/${enc(id)}/${action}`);
      const verb = action === "abort" ? "Abort" : "Retry";
      fill(outcome, notice(`${verb} accepted: the saga is ${after.state.replaceAll("_", " ")}.`));
    } catch (error) {
      fill(outcome, errorBox(error));
    }
    reload();
  }

  await reload();
  if (!saga) return undefined;
  return follow({ sagas: [id] }, (message) => {
    if (message.type === "saga") reload();
    else if (message.type === "error") fill(problem, errorBox(message.error));
  }, live.update);
}
