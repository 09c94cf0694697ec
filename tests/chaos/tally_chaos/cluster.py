"""What both forms of the run share: where everything listens, the keys and
the token, and the calls that need only HTTP or SQL."""
import hashlib
import json
import secrets
import time

from tally_chaos import snapshot
from tally_chaos.api import Client

TENANT = "chaos"

# Retention at short settings: the relay prunes, every second, the outbox
# events older than two seconds that every consumer has passed (the run's
# slow audit consumer among them, tally_chaos/audit.py).
RELAY_RETENTION = {"outbox_min_age_ms": 2000, "prune_interval_ms": 1000}


def sha256(text):
    return hashlib.sha256(text.encode()).hexdigest()


class Layout:
    def __init__(self, shard_ports, orchestrator_ports, relay_port, gateway_port, gateway_internal_port,
                 redis_port, pg_ports, token=None, app_key=None, operator_key=None, tenant=TENANT, formation=None):
        self.shard_ports, self.orchestrator_ports = shard_ports, orchestrator_ports
        self.relay_port, self.gateway_port, self.gateway_internal_port = relay_port, gateway_port, gateway_internal_port
        self.redis_port, self.pg_ports = redis_port, pg_ports  # pg_ports: one per shard, then the orchestrator's
        self.tenant = tenant
        self.token = token or secrets.token_urlsafe(24)
        self.app_key = app_key or "tk_app_" + secrets.token_urlsafe(24)
        self.operator_key = operator_key or "tk_op_" + secrets.token_urlsafe(24)
        self.formation = formation  # tally_chaos.ha.Formation: every database on one replicated cluster

    def conninfo(self, i, db):
        if self.formation:
            return self.formation.conninfo(f"{db}_{i}")
        return f"host=127.0.0.1 port={self.pg_ports[i]} user=postgres dbname={db}"

    def routes(self):
        return ";".join(f"s{i}=127.0.0.1:{p}" for i, p in enumerate(self.shard_ports))

    def api_keys(self):
        return f"{self.tenant}:app:{sha256(self.app_key)};{self.tenant}:operator:{sha256(self.operator_key)}"

    def relay_sources(self):
        src = [{"name": f"s{i}", "kind": "shard", "conninfo": self.conninfo(i, "tally")}
               for i in range(len(self.shard_ports))]
        src.append({"name": "orchestrator", "kind": "orchestrator",
                    "conninfo": self.conninfo(len(self.shard_ports), "tally")})
        return json.dumps(src)


class ClusterBase:
    """Subclasses start and stop things; this part talks HTTP and SQL."""
    relay_consumers = ["projection", "push:g0"]

    def __init__(self, layout):
        self.layout = layout
        self.shard_count = len(layout.shard_ports)
        self.orchestrator_count = len(layout.orchestrator_ports)
        self.shard_ports = layout.shard_ports
        self.internal_token = layout.token
        self.shard_conninfos = [layout.conninfo(i, "tally") for i in range(self.shard_count)]
        self.saga_conninfo = layout.conninfo(self.shard_count, "tally")
        self.redis = ("127.0.0.1", layout.redis_port)
        self.restarts = 0  # by the run's supervisor

    def ports_to_wait_for(self):
        return self.shard_ports + self.layout.orchestrator_ports + [self.layout.relay_port, self.layout.gateway_port]

    def wait_ready(self, timeout=120):
        deadline = time.time() + timeout
        for port in self.ports_to_wait_for():
            c = Client(port, timeout=2)
            while c.get("/readyz").status != 200:
                if time.time() > deadline:
                    raise RuntimeError(f"the service on port {port} did not become ready")
                time.sleep(0.2)

    def active_instance(self, shard):
        """The instance name that writes for the shard now, from its database."""
        rows = snapshot.query(self.shard_conninfos[shard], "SELECT holder FROM shard_writer")
        return rows[0][0] if rows else None

    def arm_shard_failpoint(self, shard, spec):
        r = Client(self.shard_ports[shard], self.internal_token, timeout=2).post("/v1/admin/failpoints", {"spec": spec})
        return r.status == 200
