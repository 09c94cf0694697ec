"""A consumer of every outbox that reads slowly, for the promise that
pruning loses no event. It registers itself by a cursor row in each
source database before the workload starts, so the relay's pruner must
wait for it; it then reads each outbox in commit order (below the
snapshot's xmin, where every transaction has ended) every few seconds,
saving its cursor, while the relay prunes what it and the relay's own
consumers have passed. At the end it has been given every state change of
every account (versions 1..V) and every saga's first event, or an event
was pruned before a consumer had it."""
import threading
from collections import defaultdict

from tally_chaos import snapshot

CONSUMER = "chaos-audit"
PAGE = 5000


class OutboxAudit:
    def __init__(self, cluster, tenant):
        self.tenant = tenant
        self.sources = [(c, "account_id", "aggregate_version") for c in cluster.shard_conninfos]
        self.sources.append((cluster.saga_conninfo, "saga_id", "saga_version"))
        self.cursors = [("0", 0)] * len(self.sources)
        self.account_versions = defaultdict(set)
        self.sagas_seen = set()
        self.read = 0
        self.lock = threading.Lock()  # the sampler's thread advances, the checker's takes the result

    def register(self):
        for conninfo, _, _ in self.sources:
            with snapshot.connect(conninfo) as c, c.cursor() as cur:
                cur.execute("INSERT INTO relay_cursor (consumer, tx_id, id) VALUES (%s, '0', 0)"
                            " ON CONFLICT (consumer) DO NOTHING", (CONSUMER,))
            c.close()

    def advance(self, tolerant=True):
        """Reads every source up to now; a source that cannot be reached (a
        restarting server) is read the next time, or raises when not
        tolerant."""
        with self.lock:
            for i, source in enumerate(self.sources):
                try:
                    self._advance(i, *source)
                except snapshot.UNREACHABLE:
                    if not tolerant:
                        raise

    def _advance(self, i, conninfo, object_column, version_column):
        with snapshot.connect(conninfo) as c, c.cursor() as cur:
            while True:
                tx_id, event = self.cursors[i]
                cur.execute(f"SELECT tx_id::text, id, tenant, {object_column}, {version_column} FROM outbox_event"
                            " WHERE (tx_id, id) > (%s::xid8, %s) AND tx_id < pg_snapshot_xmin(pg_current_snapshot())"
                            " ORDER BY tx_id, id LIMIT %s", (tx_id, event, PAGE))
                rows = cur.fetchall()
                for _, _, tenant, obj, version in rows:
                    if tenant != self.tenant:
                        continue
                    if object_column == "account_id":
                        self.account_versions[obj].add(version)
                    else:
                        self.sagas_seen.add(obj)
                self.read += len(rows)
                if not rows:
                    break
                self.cursors[i] = (rows[-1][0], rows[-1][1])
                cur.execute("UPDATE relay_cursor SET tx_id = %s::xid8, id = %s, updated_at = now()"
                            " WHERE consumer = %s", (*self.cursors[i], CONSUMER))
                c.commit()
        c.close()

    def outbox_rows(self):
        return sum(snapshot.query(conninfo, "SELECT count(*) FROM outbox_event")[0][0]
                   for conninfo, _, _ in self.sources)

    def result(self):
        """For the checker, after a last advance (raises while a source
        cannot be reached)."""
        self.advance(tolerant=False)
        return {"account_versions": {k: sorted(v) for k, v in self.account_versions.items()},
                "sagas_seen": sorted(self.sagas_seen), "read": self.read, "left": self.outbox_rows()}
