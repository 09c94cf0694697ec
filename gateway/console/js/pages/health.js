// Health: every service's readiness and a few figures, read every few
// seconds. Rates come from two readings of the services' counters.
import { get } from "../api.js";
import { errorBox, facts, fill, h, number, pageTitle, table, time } from "../view.js";

const EVERY_MS = 5000;

// Per second between two readings; none when a process restarted (its
// counter went back) or no earlier reading exists.
function rate(previous, current, name) {
  if (!previous || previous.metrics[name] === undefined || current.metrics[name] === undefined) return null;
  const seconds = (new Date(current.at) - new Date(previous.at)) / 1000;
  const delta = current.metrics[name] - previous.metrics[name];
  return seconds > 0 && delta >= 0 ? delta / seconds : null;
}

const perSecond = (r) =>
  (r === null ? h("span", { class: "muted", title: "needs two readings" }, "—") : `${r.toFixed(1)}/s`);

const readiness = (ready) =>
  h("span", { class: `badge ${ready ? "ready" : "not-ready"}` }, ready ? "ready" : "not ready");

// The replicated databases (GET /v1/admin/clusters): per formation its
// primary, whether it takes writes, its last failover, then its nodes.
function databases(view) {
  if (!view.configured) return [];
  const parts = [h("h2", {}, "Databases")];
  if (!view.monitor_reachable) parts.push(h("p", { class: "badge not-ready" }, "The monitor does not answer; last seen:"));
  for (const f of view.formations) {
    const last = f.last_failover;
    parts.push(facts([
      ["Formation", f.formation],
      ["Primary", f.primary ?? "none"],
      ["Takes writes", h("span", { class: `badge ${f.writable ? "ready" : "not-ready"}` }, f.writable ? "yes" : "no")],
      ["Synchronous standbys", number(f.synchronous_standbys)],
      ["Failovers", number(f.failovers)],
      ["Last failover", last ? `${last.seconds_ago} s ago, to ${last.node}` : "none recorded"],
    ]));
    parts.push(table(`Nodes of ${f.formation}`, [
      { label: "Node", cell: (n) => n.name },
      { label: "Address", cell: (n) => `${n.host}:${n.port}` },
      { label: "State", cell: (n) => n.state },
      { label: "Goal", cell: (n) => n.goal },
      { label: "Health", cell: (n) => n.health },
      { label: "Timeline", cell: (n) => n.timeline, num: true },
      { label: "Lag (bytes)", cell: (n) => number(n.lag_bytes), num: true },
      { label: "Synchronous", cell: (n) => (n.synchronous ? "yes" : "no") },
    ], f.nodes));
  }
  return parts;
}

export async function mount(view) {
  const stamp = h("p", { class: "muted", role: "status" });
  const problem = h("div");
  const services = h("section", { "aria-label": "Services" });
  const figures = h("section", { "aria-labelledby": "figures-title" });
  const shards = h("section", { "aria-label": "Shards" });
  const clusters = h("section", { "aria-label": "Databases" });
  view.append(pageTitle("Health"), stamp, problem, services, figures, shards, clusters);
  let previous = null;

  async function read() {
    const [health, counts, shardList, clusterView] = await Promise.allSettled([
      get("/v1/admin/health"), get("/v1/admin/sagas/counts"), get("/v1/admin/shards"), get("/v1/admin/clusters")]);
    fill(problem, [health, counts, shardList, clusterView].filter((r) => r.status === "rejected")
      .map((r) => errorBox(r.reason)));
    if (health.status === "fulfilled") {
      const current = health.value;
      fill(stamp, "Read at ", time(current.at), `; read again every ${EVERY_MS / 1000} s.`);
      fill(services, table("Services", [
        { label: "Service", cell: (s) => s.name },
        { label: "Ready", cell: (s) => readiness(s.ready) },
      ], current.services));
      const m = current.metrics;
      const c = counts.status === "fulfilled" ? counts.value : null;
      fill(figures, h("h2", { id: "figures-title" }, "Figures"), facts([
        ["Sagas started", perSecond(rate(previous, current, "sagas_started"))],
        ["Sagas finished", perSecond(rate(previous, current, "sagas_finished"))],
        ["Upstream failures", perSecond(rate(previous, current, "upstream_failures"))],
        ["Rate-limited requests", perSecond(rate(previous, current, "rate_limited"))],
        ["Relay lag", m.relay_lag_seconds === undefined ? "unknown" : `${m.relay_lag_seconds.toFixed(3)} s`],
        ["Sagas failed", number(c?.counts.failed)],
        ["Sagas needing attention", number(c?.counts.needs_attention)],
        ["Sagas overdue", number(c?.overdue)],
      ]));
      previous = current;
    }
    if (shardList.status === "fulfilled") {
      fill(shards, table("Shards", [
        { label: "Shard", cell: (s) => s.name },
        { label: "Health", cell: (s) => s.health },
        { label: "Writer", cell: (s) => (s.leader ? "yes" : "no") },
        { label: "Epoch", cell: (s) => s.epoch, num: true },
        { label: "Outbox backlog", cell: (s) => number(s.outbox?.undelivered), num: true },
        { label: "Oldest undelivered (ms)", cell: (s) => number(s.outbox?.oldest_undelivered_age_ms), num: true },
        { label: "Mean batch", cell: (s) => s.commits?.mean_batch_size?.toFixed(1) ?? "—", num: true },
        { label: "Mean commit (ms)", cell: (s) => s.commits?.mean_commit_ms?.toFixed(2) ?? "—", num: true },
      ], shardList.value.shards));
    }
    if (clusterView.status === "fulfilled") fill(clusters, ...databases(clusterView.value));
  }

  let timer = null;
  let stopped = false;
  const again = async () => {
    await read();
    if (!stopped) timer = setTimeout(again, EVERY_MS);
  };
  await again();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
