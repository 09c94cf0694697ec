// Sagas: how many per state (stuck ones first), filters, a page of the list.
// The filters live in the address (#/sagas?state=…&cursor=…), so a filtered
// view can be linked to and Back works.
import { get } from "../api.js";
import { errorBox, fill, h, isTerminal, pageTitle, sagaLink, stateBadge, table, time } from "../view.js";

const STATES = ["needs_attention", "pending", "running", "awaiting_confirmation", "compensating",
                "failed", "compensated", "completed"];
const TYPES = ["credit", "deduct", "refund", "transfer", "batch_deduct"];
const FILTERS = ["state", "type", "older_than_ms", "biz_id", "account", "overdue", "order"];
const PAGE = 50;

// docs/api-additions.md: overdue is pending, running or compensating past the deadline.
const overdue = (s) => ["pending", "running", "compensating"].includes(s.state) && new Date(s.deadline) < new Date();

const href = (params) => {
  const q = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== "")).toString();
  return `#/sagas${q ? `?${q}` : ""}`;
};

function countsBar(counts) {
  const item = (label, n, link, stuck) =>
    h("li", { class: stuck && n > 0 ? "stuck" : null },
      h("a", { href: link }, h("span", { class: "count", "data-count": label }, n), " ", label.replaceAll("_", " ")));
  return h("ul", { class: "counts", "aria-label": "Sagas per state" },
    item("needs_attention", counts.counts.needs_attention, href({ state: "needs_attention" }), true),
    item("overdue", counts.overdue, href({ overdue: "true" }), true),
    STATES.slice(1).map((s) => item(s, counts.counts[s], href({ state: s }), false)));
}

function sagaTable(caption, sagas) {
  return table(caption, [
    { label: "Saga", cell: (s) => sagaLink(s.saga_id) },
    { label: "Type", cell: (s) => s.type },
    { label: "State",
      cell: (s) => [stateBadge(s.state), overdue(s) ? h("span", { class: "badge overdue" }, "overdue") : null] },
    { label: "biz_id", cell: (s) => h("span", { class: "mono" }, s.biz_id) },
    { label: "Created", cell: (s) => time(s.created_at) },
    { label: "Updated", cell: (s) => time(s.updated_at) },
    { label: "Deadline", cell: (s) => (isTerminal(s.state) ? "" : time(s.deadline)) },
    { label: "Error", cell: (s) => (s.error ? h("span", { title: s.error.message }, s.error.code) : "") },
  ], sagas, "none match.");
}

function filterForm(query) {
  const select = (name, label, options) => [
    h("label", { for: `f-${name}` }, label),
    h("select", { id: `f-${name}`, name },
      h("option", { value: "" }, "any"),
      options.map((o) => h("option", { value: o, selected: query.get(name) === o }, o.replaceAll("_", " ")))),
  ];
  const olderMs = query.get("older_than_ms");
  return h("form", { class: "filters", "aria-label": "Filter sagas", onsubmit: (event) => {
    event.preventDefault();
    const f = event.target.elements;
    location.hash = href({
      state: f.state.value, type: f.type.value, biz_id: f.biz_id.value.trim(),
      older_than_ms: f.older_than_s.value === "" ? "" : String(Math.round(Number(f.older_than_s.value) * 1000)),
      account: f.account.value.trim(),
      overdue: f.overdue.checked ? "true" : "",
      order: f.oldest.checked ? "oldest" : "",
    });
  } },
    h("div", {}, select("state", "State", STATES)),
    h("div", {}, select("type", "Type", TYPES)),
    h("div", {}, h("label", { for: "f-older" }, "Older than (seconds)"),
      h("input", { id: "f-older", name: "older_than_s", type: "number", min: "0", step: "any",
                   value: olderMs ? Number(olderMs) / 1000 : null })),
    h("div", {}, h("label", { for: "f-biz" }, "biz_id"),
      h("input", { id: "f-biz", name: "biz_id", value: query.get("biz_id"), autocomplete: "off",
                   spellcheck: "false" })),
    h("div", {}, h("label", { for: "f-account" }, "Account"),
      h("input", { id: "f-account", name: "account", value: query.get("account"), autocomplete: "off",
                   spellcheck: "false" })),
    h("div", { class: "check" },
      h("input", { id: "f-overdue", name: "overdue", type: "checkbox", checked: query.get("overdue") === "true" }),
      h("label", { for: "f-overdue" }, "Overdue only")),
    h("div", { class: "check" },
      h("input", { id: "f-oldest", name: "oldest", type: "checkbox", checked: query.get("order") === "oldest" }),
      h("label", { for: "f-oldest" }, "Oldest first")),
    h("div", { class: "buttons" },
      h("button", { type: "submit" }, "Apply"), h("a", { href: "#/sagas" }, "Clear filters")));
}

export async function mount(view, _params, query) {
  const filters = Object.fromEntries(FILTERS.map((f) => [f, query.get(f) ?? undefined]));
  const filtered = Object.entries(filters).some(([name, v]) => name !== "order" && v);
  const countsArea = h("section", { "aria-label": "Counts" });
  const stuckArea = h("div");
  const listArea = h("section", { "aria-labelledby": "list-title" });
  const refresh = h("button", { type: "button", onclick: load }, "Refresh");
  view.append(pageTitle("Sagas"), countsArea, h("div", { class: "toolbar" }, filterForm(query), refresh),
              stuckArea, listArea);

  async function load() {
    const [counts, list, attention, late] = await Promise.allSettled([
      get("/v1/admin/sagas/counts"),
      get("/v1/admin/sagas", { ...filters, cursor: query.get("cursor"), limit: PAGE }),
      filtered ? null : get("/v1/admin/sagas", { state: "needs_attention", order: "oldest", limit: 20 }),
      filtered ? null : get("/v1/admin/sagas", { overdue: "true", order: "oldest", limit: 20 }),
    ]);
    fill(countsArea, counts.status === "fulfilled" ? countsBar(counts.value) : errorBox(counts.reason));
    // Unfiltered, the stuck sagas come first.
    const stuck = (title, result) => {
      if (result.status === "rejected") return errorBox(result.reason);
      if (!result.value?.sagas.length) return null;
      return h("section", {}, h("h2", {}, title), sagaTable(`${title} (up to 20, oldest first)`, result.value.sagas));
    };
    fill(stuckArea, stuck("Needs attention", attention), stuck("Overdue: past their deadline, not finished", late));
    if (list.status === "rejected") {
      fill(listArea, errorBox(list.reason));
      return;
    }
    const { sagas, next } = list.value;
    const cursor = query.get("cursor");
    fill(listArea,
      h("h2", { id: "list-title" }, filtered ? "Matching sagas" : "All sagas"),
      sagaTable(`${cursor ? `After ${cursor}` : "From the first"}, ${filters.order === "oldest" ? "oldest" : "newest"} first`,
        sagas),
      h("nav", { class: "pager", "aria-label": "Pages of sagas" },
        cursor ? h("a", { href: href(filters) }, "First page") : null,
        next ? h("a", { href: href({ ...filters, cursor: next }), rel: "next" }, "Next page") : null));
  }

  await load();
}
