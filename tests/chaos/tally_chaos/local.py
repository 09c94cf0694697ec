"""The system as local processes on loopback: one PostgreSQL per shard and one
for the orchestrator (started by scripts/chaos with scripts/lib/servers.sh),
or with --ha every database on one replicated cluster (tally_chaos/ha.py),
Redis, 3 shards with a standby each, 2 orchestrators, the relay and the
gateway. A supervisor restarts whatever exits, as an init system would."""
import os
import random
import signal
import socket
import subprocess
import threading
import time

from tally_chaos.cluster import RELAY_RETENTION, ClusterBase, Layout


def ephemeral_low():
    """The first port the kernel gives to outgoing connections."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_chosen = set()
_ports = random.Random()  # not the workload's seeded generator


def free_port():
    """A port free now and below the ephemeral range. A listening port from
    that range (what bind to port 0 gives) can be taken as the source port of
    any outgoing connection, a PostgreSQL pool's for one, between the choice
    and a start or restart of the process that listens on it, and stay taken
    for as long as that connection lives."""
    low = ephemeral_low()
    for _ in range(1000):
        port = _ports.randrange(10000, low)
        if port in _chosen:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _chosen.add(port)
        return port
    raise RuntimeError(f"no free port between 10000 and {low}")


class Proc:
    def __init__(self, name, argv, env, log_path, restart=True):
        self.name, self.argv, self.env, self.log_path, self.restart = name, argv, env, log_path, restart
        self.p = None

    def start(self):
        log = open(self.log_path, "ab")
        self.p = subprocess.Popen(self.argv, env={**os.environ, **self.env}, stdout=log, stderr=log,
                                  stdin=subprocess.DEVNULL)
        log.close()

    def alive(self):
        return self.p is not None and self.p.poll() is None

    def signal(self, sig):
        if self.alive():
            os.kill(self.p.pid, sig)


class LocalCluster(ClusterBase):
    def __init__(self, root, bin_dir, run_dir, pg, log, formation=None):
        """pg: [{"port", "data"}] for each shard, then the orchestrator; or
        formation, a tally_chaos.ha.Formation holding database tally_<i> of
        each."""
        layout = Layout(shard_ports=[free_port() for _ in range(3)], orchestrator_ports=[free_port(), free_port()],
                        relay_port=free_port(), gateway_port=free_port(), gateway_internal_port=free_port(),
                        redis_port=free_port(), pg_ports=[p["port"] for p in pg], formation=formation)
        super().__init__(layout)
        self.root, self.bin, self.run_dir, self.pg, self.log = root, bin_dir, run_dir, pg, log
        self.formation = formation
        # On a cluster, a write is acknowledged only once a synchronous standby has it (docs/ha.md).
        self.replicated = {"DATABASE_REQUIRE_SYNCHRONOUS_STANDBY": "true"} if formation else {}
        self.procs = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    def add(self, name, binary, args, env, restart=True):
        self.procs[name] = Proc(name, [os.path.join(self.bin, binary)] + args, env,
                                os.path.join(self.run_dir, f"{name}.log"), restart)

    def start(self):
        L = self.layout
        self.procs["redis"] = Proc("redis", ["redis-server", "--bind", "127.0.0.1", "--port", str(L.redis_port),
                                             "--save", "", "--appendonly", "no"],
                                   {}, os.path.join(self.run_dir, "redis.log"))
        for i, port in enumerate(L.shard_ports):
            for side in "ab":
                self.add(f"shard-{i}{side}", "account_shard/account_shard", [f"--listen.port={port}"],
                         {"TALLY_SHARD_DATABASE_CONNINFO": L.conninfo(i, "tally"),
                          "TALLY_SHARD_INTERNAL_TOKEN": L.token, "TALLY_SHARD_INSTANCE": f"shard-{i}{side}",
                          **{f"TALLY_SHARD_{k}": v for k, v in self.replicated.items()}})
        for j, port in enumerate(L.orchestrator_ports):
            self.add(f"orchestrator-{j}", "orchestrator/orchestrator",
                     [f"--listen.port={port}", f"--shards={L.routes()}", f"--instance=orchestrator-{j}"],
                     {"TALLY_ORCH_DATABASE_CONNINFO": L.conninfo(len(L.shard_ports), "tally"),
                      "TALLY_ORCH_INTERNAL_TOKEN": L.token,
                      **{f"TALLY_ORCH_{k}": v for k, v in self.replicated.items()}})
        self.add("relay", "relay/relay",
                 [f"--listen.port={L.relay_port}", f"--redis.port={L.redis_port}",
                  f"--gateways=g0=127.0.0.1:{L.gateway_internal_port}", "--standby_poll_ms=200",
                  *(f"--{k}={v}" for k, v in RELAY_RETENTION.items())],
                 {"TALLY_RELAY_SOURCES": L.relay_sources(), "TALLY_RELAY_INTERNAL_TOKEN": L.token})
        orchestrators = ",".join(f"127.0.0.1:{p}" for p in L.orchestrator_ports)
        self.add("gateway", "gateway/gateway",
                 [f"--listen.port={L.gateway_port}", f"--internal.port={L.gateway_internal_port}",
                  f"--orchestrator={orchestrators}", f"--shards={L.routes()}", f"--redis.port={L.redis_port}",
                  *([f"--ha.monitor={self.formation.monitor_conninfo()}"] if self.formation else [])],
                 {"TALLY_GATEWAY_API_KEYS": L.api_keys(), "TALLY_GATEWAY_INTERNAL_TOKEN": L.token})
        # The first instance of each shard applies the migrations and writes;
        # the second starts once it does, as a standby.
        self.procs["redis"].start()
        for i in range(self.shard_count):
            self.procs[f"shard-{i}a"].start()
        for name, p in self.procs.items():
            if not p.alive() and not name.endswith("b"):
                p.start()
        self.wait_ready()
        for i in range(self.shard_count):
            self.procs[f"shard-{i}b"].start()
        threading.Thread(target=self.supervise, daemon=True, name="supervisor").start()

    def supervise(self):
        while not self.stopping.wait(0.2):
            with self.lock:
                for p in self.procs.values():
                    if p.restart and not p.alive():
                        self.log(f"supervisor: {p.name} exited ({p.p.returncode}); restarting")
                        self.restarts += 1
                        p.start()

    def stop(self):
        self.stopping.set()
        for p in self.procs.values():
            p.signal(signal.SIGCONT)
            p.signal(signal.SIGTERM)
        for p in self.procs.values():
            if p.p is not None:
                try:
                    p.p.wait(15)
                except subprocess.TimeoutExpired:
                    p.p.kill()
        if self.formation:
            self.formation.stop()

    def active_proc(self, shard):
        name = self.active_instance(shard)
        p = self.procs.get(name)
        return p if p is not None and p.alive() else None

    # -- faults ------------------------------------------------------------------
    def signal_shard_active(self, shard, sig):
        """Signals the shard's writer; its name, or None when none runs."""
        p = self.active_proc(shard)
        if p is None:
            return None
        p.signal(sig)
        return p.name

    def kill_shard_active(self, shard):
        return self.signal_shard_active(shard, signal.SIGKILL)

    def pause_shard_active(self, shard):
        return self.signal_shard_active(shard, signal.SIGSTOP)

    def resume_shard(self, shard):
        for i in "ab":
            self.procs[f"shard-{shard}{i}"].signal(signal.SIGCONT)

    def kill_orchestrator(self, i):
        self.procs[f"orchestrator-{i}"].signal(signal.SIGKILL)

    def kill_relay(self):
        self.procs["relay"].signal(signal.SIGKILL)

    def restart_shard_postgres(self, shard):
        subprocess.run(["bash", "-c", 'source scripts/lib/servers.sh && tally_pg_restart_immediate "$1"', "-",
                        self.pg[shard]["data"]], cwd=self.root, check=True, capture_output=True, timeout=90)

    def restart_redis_empty(self):
        with self.lock:  # the supervisor must not restart it in between
            r = self.procs["redis"]
            r.signal(signal.SIGKILL)
            r.p.wait(10)
            time.sleep(0.5)
            r.start()

    def everything_running(self):
        return all(p.alive() for p in self.procs.values())

    def shard_log_lines(self):
        for name, p in self.procs.items():
            if name.startswith("shard-"):
                with open(p.log_path, errors="replace") as f:
                    yield from f

    def postgres_logs(self):
        if self.formation:
            return self.formation.postgres_logs()
        return [(p["name"], os.path.join(p["data"], "server.log")) for p in self.pg]
