"""The system under docker-compose (compose.yaml, started by
scripts/compose-up): faults are `docker kill` (then `docker start`, as an
operator or a supervisor would), `docker kill -s STOP`/`CONT`, an immediate
shutdown inside a PostgreSQL container, and crashes at failpoints, which the
restart policy recovers by itself. With --ha (compose-up --ha, the profile
ha) the databases live on pg_auto_failover's formation of three data-node
containers, and ComposeFormation makes the cluster's faults on them."""
import os
import shutil
import subprocess
import threading
import time

import psycopg2

from tally_chaos import snapshot
from tally_chaos.cluster import ClusterBase, Layout
from tally_chaos.ha import Formation, Node

DOCKER = "/usr/bin/docker" if os.path.exists("/usr/bin/docker") else shutil.which("docker")
SERVICES = ([f"tally-shard-{i}{s}" for i in range(3) for s in "ab"]
            + ["tally-orchestrator-0", "tally-orchestrator-1", "tally-relay", "tally-gateway"])
POSTGRES = ["tally-pg-shard-0", "tally-pg-shard-1", "tally-pg-shard-2", "tally-pg-orchestrator"]  # as pg_ports
MONITOR_PORT = 25440  # the profile ha's monitor; its data nodes listen on the next three ports


def docker(*args, check=False, timeout=60):
    return subprocess.run([DOCKER, *args], capture_output=True, text=True, check=check, timeout=timeout)


class ComposeNode(Node):
    """A data node of the profile ha: its container runs in the group named
    by its port (compose.yaml)."""

    def __init__(self, n):
        super().__init__(n, f"node_{n}", MONITOR_PORT + n, str(MONITOR_PORT + n))
        self.container = f"tally-pg-node-{n}"
        self.lost = False


class ComposeFormation(Formation):
    """compose.yaml's formation "default": a node lost is its container
    killed (started again later, as a host that comes back), a stall is
    `docker pause`, the postmaster alone is killed inside the container, a
    switchover is pg_autoctl's inside the monitor's."""

    def __init__(self, run_dir, log):
        super().__init__("default", MONITOR_PORT, [ComposeNode(n) for n in (1, 2, 3)], log)
        self.run_dir, self.monitor = run_dir, "tally-pg-monitor"

    def containers(self):
        return [self.monitor] + [node.container for node in self.nodes]

    def held(self):
        """Containers the run's supervisor must leave stopped."""
        return {node.container for node in self.nodes if node.lost}

    def lose(self, node, back_after_s):
        node.lost = True
        docker("kill", node.container)
        threading.Timer(back_after_s, self.bring_back, args=(node,)).start()

    def bring_back(self, node):
        with self.lock:
            if not node.lost:
                return
            docker("start", node.container)
            node.lost = False
        self.log(f"ha: node {node.n} is back (docker start {node.container})")

    def kill_postmaster(self, node):
        docker("exec", node.container, "sh", "-c", 'kill -KILL "$(head -1 "$PGDATA/postmaster.pid")"', check=True)

    def stall(self, node, for_s):
        """Every process of the container frozen (the cgroup freezer), then
        thawed: a primary that wakes up after its failover must take no
        write."""
        docker("pause", node.container, check=True)
        threading.Timer(for_s, docker, args=("unpause", node.container)).start()

    def switchover(self):
        docker("exec", self.monitor, "pg_autoctl", *self.switchover_args(), check=True, timeout=120)

    def stop(self):
        for node in self.nodes:
            self.heal(node)
            docker("unpause", node.container)
            self.bring_back(node)

    def saved_logs(self, node):
        return os.path.join(self.run_dir, f"{node.container}-log")

    def save_logs(self):
        """PostgreSQL's own log files of each data node (pg_autoctl turns on
        the logging collector); the containers' logs hold the keepers'."""
        for node in self.nodes:
            docker("cp", f"{node.container}:/var/lib/postgresql/node/log", self.saved_logs(node))

    def postgres_logs(self):
        """Written by save_logs()."""
        out = []
        for node in self.nodes:
            logs = self.saved_logs(node)
            if os.path.isdir(logs):
                out += [(f"node {node.n}", os.path.join(logs, f)) for f in sorted(os.listdir(logs))]
        return out


class ComposeCluster(ClusterBase):
    def __init__(self, run_dir, log, ha=False):
        env = os.environ
        self.formation = ComposeFormation(run_dir, log) if ha else None
        layout = Layout(shard_ports=[27101, 27102, 27103], orchestrator_ports=[27001, 27002], relay_port=27301,
                        gateway_port=28080, gateway_internal_port=28081, redis_port=26379,
                        pg_ports=[25432, 25433, 25434, 25435], token=env["TALLY_INTERNAL_TOKEN"],
                        app_key=env["TALLY_APP_KEY"], operator_key=env["TALLY_OPERATOR_KEY"],
                        tenant=env.get("TALLY_TENANT", "demo"), formation=self.formation)
        super().__init__(layout)
        self.run_dir, self.log = run_dir, log
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.containers = (self.formation.containers() if ha else POSTGRES) + ["tally-redis"] + SERVICES

    def states(self):
        out = docker("ps", "-a", "--filter", "name=tally-", "--format", "{{.Names}} {{.State}}").stdout.split("\n")
        return dict(line.split(" ", 1) for line in out if " " in line)

    def start(self):
        missing = [c for c in self.containers if c not in self.states()]
        if missing:
            raise RuntimeError(f"containers missing (run scripts/compose-up{' --ha' if self.formation else ''}): "
                               f"{missing}")
        self.wait_ready()
        if self.formation:
            for node in self.formation.nodes:
                self.check_orphans_harmless(node.container, f"host=127.0.0.1 port={node.port} user=postgres "
                                                            "dbname=postgres")
        else:
            for i, container in enumerate(POSTGRES):
                self.check_orphans_harmless(container, self.layout.conninfo(i, "tally"))
        threading.Thread(target=self.supervise, daemon=True, name="supervisor").start()

    def check_orphans_harmless(self, container, conninfo, timeout_s=30):
        """An orphan that exits with status 2 inside the container must not
        end the server's connections (compose.yaml: PostgreSQL is not PID 1).
        Raises when it does."""
        deadline = time.time() + timeout_s
        while True:  # healthy inside the container; the first connection from outside may take longer
            try:
                c = snapshot.connect(conninfo)
                break
            except psycopg2.OperationalError:
                if time.time() > deadline:
                    raise
                time.sleep(0.5)
        try:
            pid = docker("exec", container, "sh", "-c", "(sleep 0.2; exit 2) >/dev/null 2>&1 & echo $!",
                         check=True).stdout.strip()
            deadline = time.time() + timeout_s
            while docker("exec", container, "sh", "-c", f"kill -0 {pid}").returncode == 0:  # until it is reaped
                if time.time() > deadline:
                    raise RuntimeError(f"{container}: the orphan {pid} was not reaped in {timeout_s} s")
                time.sleep(0.1)
            try:
                c.cursor().execute("SELECT 1")
            except psycopg2.Error as e:
                raise RuntimeError(f"{container}: an orphan's exit restarted PostgreSQL "
                                   f"({snapshot.one_line(e)}); it must not run as PID 1") from None
        finally:
            c.close()

    def supervise(self):
        """Starts what `docker kill` stopped; the restart policy brings back
        what crashed by itself (a failpoint, an immediate shutdown)."""
        while not self.stopping.wait(0.5):
            with self.lock:
                held = self.formation.held() if self.formation else set()
                for name, state in self.states().items():
                    if name in self.containers and name not in held and state == "exited":
                        if docker("start", name).returncode == 0:
                            self.restarts += 1
                            self.log(f"supervisor: docker start {name}")

    def stop(self):
        self.stopping.set()
        if self.formation:
            self.formation.stop()
            self.formation.save_logs()
        for name in self.containers:
            docker("kill", "-s", "CONT", name)
            with open(os.path.join(self.run_dir, f"{name}.log"), "w") as f:
                subprocess.run([DOCKER, "logs", name], stdout=f, stderr=subprocess.STDOUT, timeout=60)

    def everything_running(self):
        states = self.states()
        return all(states.get(c) == "running" for c in self.containers)

    def shard_log_lines(self):
        for c in SERVICES:
            if c.startswith("tally-shard-"):
                r = docker("logs", c)
                yield from (r.stdout + r.stderr).splitlines()

    def postgres_logs(self):
        """Written by stop()."""
        if self.formation:
            return self.formation.postgres_logs()
        return [(c, os.path.join(self.run_dir, f"{c}.log")) for c in POSTGRES]

    # -- faults ------------------------------------------------------------------
    def active_container(self, shard):
        name = self.active_instance(shard)
        return f"tally-{name}" if name else None

    def signal_shard_active(self, shard, sig):
        """Signals the shard's writer's container; its name, or None."""
        c = self.active_container(shard)
        return c if c and docker("kill", "-s", sig, c).returncode == 0 else None

    def kill_shard_active(self, shard):
        return self.signal_shard_active(shard, "KILL")

    def pause_shard_active(self, shard):
        return self.signal_shard_active(shard, "STOP")

    def resume_shard(self, shard):
        for side in "ab":
            docker("kill", "-s", "CONT", f"tally-shard-{shard}{side}")

    def kill_orchestrator(self, i):
        docker("kill", f"tally-orchestrator-{i}")

    def kill_relay(self):
        docker("kill", "tally-relay")

    def restart_shard_postgres(self, shard):
        # The server runs in the foreground: it ends, the container exits, and
        # the restart policy starts it again (crash recovery).
        docker("exec", f"tally-pg-shard-{shard}", "sh", "-c",
               '/usr/lib/postgresql/15/bin/pg_ctl -D "$PGDATA" stop -m immediate', timeout=60)

    def restart_redis_empty(self):
        with self.lock:
            docker("kill", "tally-redis")
            time.sleep(0.5)
            docker("start", "tally-redis", check=True)
