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


class Faults:
    def __init__(self, cluster, seed, mean_gap_s, pause_s, log):
        self.cluster, self.rng = cluster, random.Random(f"faults-{seed}")
        self.mean_gap_s, self.pause_s, self.log = mean_gap_s, pause_s, log
        self.events = []          # {"t", "kind", "target", "detail"}
        self.stop = threading.Event()
        self.thread = None
        self.paused = set()       # shards stopped right now

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

    def resume(self, shard):
        self.cluster.resume_shard(shard)
        self.paused.discard(shard)

    def run(self):
        kinds, weights = zip(*KINDS.items())
        while not self.stop.wait(self.rng.expovariate(1.0 / self.mean_gap_s)):
            try:
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
