"""Faults at random moments, from a seeded generator: the same seed gives the
same sequence of kinds, targets and gaps. A cluster (local processes or
docker-compose) carries them out."""
import random
import threading
import time

# The failpoints each crash kind arms. The expiry ones are reached only by a
# batch with an expire command: the shard's next expiry pass (every second,
# and the workload's expiring credits make lots due on every shard) hits them.
FAILPOINTS = {
    "shard_failpoint_crash": ["between_statements", "after_outbox_insert", "before_commit",
                              "after_commit_before_reply"],
    "shard_expiry_failpoint_crash": ["expiry_before_commit", "expiry_after_commit_before_reply"],
}

# kind: weight
KINDS = {
    "shard_failpoint_crash": 5,   # kill -9 at a failpoint of the commit path (crash at its next hit)
    "shard_expiry_failpoint_crash": 3,  # the same in the commit path of the expiry job's batches
    "shard_kill": 4,              # kill -9 a shard's active instance: its standby takes over
    "shard_pause": 1,             # SIGSTOP past the saga timeouts, then SIGCONT
    "orchestrator_kill": 3,
    "relay_kill": 2,
    "postgres_restart": 2,        # a shard's PostgreSQL, immediate shutdown, then start
    "redis_restart_empty": 1,
}

# With --ha (every database on one replicated cluster, tally_chaos/ha.py):
# PostgreSQL's own restart gives way to the cluster's faults, made on the
# primary of a formation that has been whole for HA_QUIET_S, which takes
# the next fault (the others are drawn from the kinds above meanwhile).
HA_KINDS = {
    "primary_node_loss": 4,        # keeper and PostgreSQL killed; the host is back NODE_BACK_S later
    "primary_postmaster_kill": 2,  # the postmaster alone: its keeper restarts it in place
    "primary_stall": 2,            # SIGSTOP of the node past the monitor's timeouts, then SIGCONT
    "primary_network_cut": 3,      # its traffic dropped (iptables) while it runs; joined again NODE_BACK_S later
    "switchover": 2,               # planned: pg_autoctl perform switchover
}
FAILOVER_KINDS = ("primary_node_loss", "primary_stall", "primary_network_cut", "switchover")
NODE_BACK_S = 30  # after the failover, as a host that is repaired: one back sooner holds the failover up
HA_QUIET_S = 10  # after the formation is whole again, before its next fault: each one's recovery is its own


def kinds_for(ha):
    """The kinds drawn between the cluster's faults."""
    return {k: w for k, w in KINDS.items() if not (ha and k == "postgres_restart")}


class Faults:
    def __init__(self, cluster, seed, mean_gap_s, pause_s, log, kinds=None, ha_kinds=None):
        self.cluster, self.rng = cluster, random.Random(f"faults-{seed}")
        self.kinds = kinds or KINDS
        self.ha_kinds = ha_kinds or HA_KINDS
        self.mean_gap_s, self.pause_s, self.log = mean_gap_s, pause_s, log
        self.events = []          # {"t", "kind", "target", "detail"}
        self.stop = threading.Event()
        self.thread = None
        self.paused = set()       # shards stopped right now
        self.formation_whole_since = None  # --ha: when the formation was last seen whole after a fault

    def record(self, kind, target, detail=""):
        e = {"t": time.time(), "kind": kind, "target": target, "detail": detail}
        self.events.append(e)
        self.log(f"fault {len(self.events):3d} {kind:22s} {target} {detail}")

    def inject(self, kind):
        c, rng = self.cluster, self.rng
        shard = rng.randrange(c.shard_count)
        if kind in FAILPOINTS:
            point = rng.choice(FAILPOINTS[kind])
            if c.arm_shard_failpoint(shard, f"{point}=crash"):
                self.record(kind, f"shard {shard}", point)
        elif kind == "shard_kill":
            who = c.kill_shard_active(shard)
            if who:
                self.record(kind, f"shard {shard}", who)
        elif kind == "shard_pause":
            if self.paused:
                return
            who = c.pause_shard_active(shard)
            if who:
                self.paused.add(shard)
                self.record(kind, f"shard {shard}", f"{who} for {self.pause_s:.0f} s")
                threading.Timer(self.pause_s, self.resume, args=(shard,)).start()
        elif kind == "orchestrator_kill":
            i = rng.randrange(c.orchestrator_count)
            c.kill_orchestrator(i)
            self.record(kind, f"orchestrator {i}")
        elif kind == "relay_kill":
            c.kill_relay()
            self.record(kind, "relay")
        elif kind == "postgres_restart":
            c.restart_shard_postgres(shard)
            self.record(kind, f"postgres of shard {shard}")
        elif kind == "redis_restart_empty":
            c.restart_redis_empty()
            self.record(kind, "redis")
        elif kind in HA_KINDS:
            self.inject_on_primary(kind)

    def inject_on_primary(self, kind):
        f = self.cluster.formation
        primary = f.primary()
        if primary is None:
            self.log(f"fault not injected: {kind}: the formation has no primary now")
            return
        self.formation_whole_since = None
        target = f"node {primary.n}"
        if kind == "primary_node_loss":
            self.record(kind, target, f"back after {NODE_BACK_S} s")
            f.lose(primary, NODE_BACK_S)
        elif kind == "primary_postmaster_kill":
            self.record(kind, target)
            f.kill_postmaster(primary)
        elif kind == "primary_stall":
            self.record(kind, target, f"for {self.pause_s:.0f} s")
            f.stall(primary, self.pause_s)
        elif kind == "primary_network_cut":
            if not f.can_cut():  # not root, or no iptables: a node loss instead, said in the report
                self.record("primary_node_loss", target, f"back after {NODE_BACK_S} s (no network cut here)")
                f.lose(primary, NODE_BACK_S)
                return
            self.record(kind, target, f"joined again after {NODE_BACK_S} s")
            f.cut(primary, NODE_BACK_S)
        else:
            self.record(kind, target)
            started = time.time()
            f.switchover()
            self.log(f"switchover done after {time.time() - started:.1f} s")

    def resume(self, shard):
        self.cluster.resume_shard(shard)
        self.paused.discard(shard)

    def formation_ready(self):
        """--ha: whether the formation has been whole for HA_QUIET_S."""
        f = getattr(self.cluster, "formation", None)
        if f is None:
            return False
        if not f.healthy():
            self.formation_whole_since = None
        elif self.formation_whole_since is None:
            self.formation_whole_since = time.time()
        return self.formation_whole_since is not None and time.time() - self.formation_whole_since >= HA_QUIET_S

    def failovers(self):
        return sum(1 for e in self.events if e["kind"] in FAILOVER_KINDS)

    def run(self):
        kinds, weights = zip(*self.kinds.items())
        ha_kinds, ha_weights = zip(*self.ha_kinds.items())
        while not self.stop.wait(self.rng.expovariate(1.0 / self.mean_gap_s)):
            try:
                # A formation that is ready takes the next fault.
                if self.formation_ready():
                    self.inject(self.rng.choices(ha_kinds, ha_weights)[0])
                    continue
                self.inject(self.rng.choices(kinds, weights)[0])
            except Exception as e:  # a fault that could not be made is reported, not fatal
                self.log(f"fault not injected: {e!r}")

    def start(self):
        self.thread = threading.Thread(target=self.run, daemon=True, name="faults")
        self.thread.start()

    def finish(self):
        self.stop.set()
        if self.thread:
            self.thread.join()
        deadline = time.time() + self.pause_s + 5
        while self.paused and time.time() < deadline:
            time.sleep(0.1)
