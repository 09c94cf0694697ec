"""The whole system as local processes on loopback, for the console's tests:
a throwaway PostgreSQL (scripts/lib/servers.sh; one database per shard and
one for the orchestrator), a redis-server, two shards, the orchestrator, the
relay and the gateway, from TALLY_TEST_BIN_DIR (default build/ci).

    with Stack() as s:            # or python3 tests/console/stack.py: run until Ctrl-C
        s.api("POST", "/v1/accounts", {"account_id": "alice"})

Everything started here is stopped by stop() (on leaving the with block),
and the services also die with this process (PR_SET_PDEATHSIG) should it
be killed without cleaning up. Callers turn SIGTERM into an exception so
that stop() runs then too."""
import ctypes
import hashlib
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TENANT = "console"
BUCKETS = 1024


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sha256(text):
    return hashlib.sha256(text.encode()).hexdigest()


def shard_of(account, shards=2, tenant=TENANT):
    """The routing of common/sharding/routing.cpp: buckets split evenly in order."""
    bucket = int(sha256(tenant + "\x1f" + account)[:16], 16) % BUCKETS
    return bucket * shards // BUCKETS


def _die_with_parent():
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body) if self.body else None

    def __repr__(self):
        return f"{self.status} {self.body[:300]!r}"


def request(port, method, path, body=None, token=None, timeout=10):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = "Bearer " + token
        c.request(method, path, None if body is None else json.dumps(body), headers)
        r = c.getresponse()
        return Response(r.status, dict(r.getheaders()), r.read().decode())
    finally:
        c.close()


class Stack:
    def __init__(self, log_dir=None, log=print):
        self.bin = os.environ.get("TALLY_TEST_BIN_DIR", os.path.join(ROOT, "build", "ci"))
        self.console_dir = os.environ.get("TALLY_CONSOLE_DIR")
        self.ha_monitor = os.environ.get("TALLY_TEST_HA_MONITOR")
        self.own_log_dir = log_dir is None  # a temporary one, removed by stop()
        self.log_dir = log_dir or tempfile.mkdtemp(prefix="tally-console-logs.")
        self.log = log
        self.token = secrets.token_urlsafe(24)
        self.app_key = "tk_app_" + secrets.token_urlsafe(24)
        self.operator_key = "tk_op_" + secrets.token_urlsafe(24)
        self.procs = {}
        self.pg_dir = None
        self.pg_port = None

    # -- life cycle --------------------------------------------------------------
    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        for binary in ("account_shard/account_shard", "orchestrator/orchestrator", "relay/relay", "gateway/gateway"):
            if not os.access(os.path.join(self.bin, binary), os.X_OK):
                raise RuntimeError(f"{binary} not found in {self.bin} (TALLY_TEST_BIN_DIR)")
        os.makedirs(self.log_dir, exist_ok=True)
        self._start_postgres()
        self.redis_port = free_port()
        self._spawn("redis", ["redis-server", "--bind", "127.0.0.1", "--port", str(self.redis_port),
                              "--save", "", "--appendonly", "no"], {})
        self.shard_ports = [free_port(), free_port()]
        self.orch_port, self.relay_port = free_port(), free_port()
        self.gateway_port, self.gateway_internal_port = free_port(), free_port()
        routes = ";".join(f"s{i}=127.0.0.1:{p}" for i, p in enumerate(self.shard_ports))
        for i, port in enumerate(self.shard_ports):
            self._spawn(f"shard_{i}", [self._exe("account_shard/account_shard"), f"--listen.port={port}"],
                        {"TALLY_SHARD_DATABASE_CONNINFO": self.conninfo(f"shard_{i}"),
                         "TALLY_SHARD_INTERNAL_TOKEN": self.token})
        self._spawn("orchestrator", [self._exe("orchestrator/orchestrator"), f"--listen.port={self.orch_port}",
                                     f"--shards={routes}"],
                    {"TALLY_ORCH_DATABASE_CONNINFO": self.conninfo("sagas"), "TALLY_ORCH_INTERNAL_TOKEN": self.token})
        keys = f"{TENANT}:app:{sha256(self.app_key)};{TENANT}:operator:{sha256(self.operator_key)}"
        gateway_args = [self._exe("gateway/gateway"), f"--listen.port={self.gateway_port}",
                        f"--internal.port={self.gateway_internal_port}", f"--orchestrator=127.0.0.1:{self.orch_port}",
                        f"--shards={routes}", f"--redis.port={self.redis_port}",
                        "--relay.host=127.0.0.1", f"--relay.port={self.relay_port}"]
        if self.console_dir:
            gateway_args.append(f"--console.dir={os.path.abspath(self.console_dir)}")
        if self.ha_monitor:  # the replicated clusters' monitor, for the Health page's databases
            gateway_args += [f"--ha.monitor={self.ha_monitor}", "--ha.poll_ms=500"]
        self._spawn("gateway", gateway_args,
                    {"TALLY_GATEWAY_API_KEYS": keys, "TALLY_GATEWAY_INTERNAL_TOKEN": self.token})
        sources = [{"name": f"s{i}", "kind": "shard", "conninfo": self.conninfo(f"shard_{i}")} for i in range(2)]
        sources.append({"name": "orchestrator", "kind": "orchestrator", "conninfo": self.conninfo("sagas")})
        self._spawn("relay", [self._exe("relay/relay"), f"--listen.port={self.relay_port}",
                              f"--redis.port={self.redis_port}",
                              f"--gateways=g0=127.0.0.1:{self.gateway_internal_port}",
                              "--standby_poll_ms=100", "--retry_max_ms=500"],
                    {"TALLY_RELAY_SOURCES": json.dumps(sources), "TALLY_RELAY_INTERNAL_TOKEN": self.token})
        for port in self.shard_ports + [self.orch_port, self.relay_port, self.gateway_port]:
            self._wait_ready(port)
        self.log(f"stack: gateway on http://127.0.0.1:{self.gateway_port}/ (logs in {self.log_dir})")

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for name, p in self.procs.items():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                self.log(f"stack: {name} did not stop in 10 s; killing it")
                p.kill()
                p.wait()
        self.procs.clear()
        if self.pg_dir:
            subprocess.run(["bash", "-c", 'source scripts/lib/servers.sh && tally_pg_stop "$1"', "-", self.pg_dir],
                           cwd=ROOT, capture_output=True, timeout=90)
            shutil.rmtree(self.pg_dir, ignore_errors=True)
            self.pg_dir = None
        if self.own_log_dir:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def exited(self):
        """The services that have exited, each with its exit status and the end of its log."""
        out = []
        for name, p in self.procs.items():
            if p.poll() is not None:
                with open(os.path.join(self.log_dir, f"{name}.log"), errors="replace") as f:
                    tail = "".join(f.readlines()[-5:])
                out.append(f"{name} exited ({p.returncode}); the end of its log:\n{tail}")
        return out

    def _start_postgres(self):
        self.pg_dir = tempfile.mkdtemp(prefix="tally-console-pg.")
        script = ('source scripts/lib/servers.sh && tally_pg_start "$1" >&2 && echo "$TALLY_PG_PORT" && '
                  'for db in shard_0 shard_1 sagas; do _tally_as_pg psql -q -h 127.0.0.1 -p "$TALLY_PG_PORT" '
                  '-U postgres -d postgres -c "CREATE DATABASE $db" >&2 || exit 1; done')
        r = subprocess.run(["bash", "-c", script, "-", self.pg_dir], cwd=ROOT, capture_output=True, text=True,
                           timeout=120)
        if r.returncode != 0:
            raise RuntimeError("PostgreSQL did not start:\n" + r.stderr)
        self.pg_port = int(r.stdout.split()[0])

    def conninfo(self, db):
        return f"host=127.0.0.1 port={self.pg_port} user=postgres dbname={db}"

    def _exe(self, binary):
        return os.path.join(self.bin, binary)

    def _spawn(self, name, argv, env):
        with open(os.path.join(self.log_dir, f"{name}.log"), "wb") as log:
            self.procs[name] = subprocess.Popen(argv, env={**os.environ, **env}, stdin=subprocess.DEVNULL,
                                                stdout=log, stderr=log, preexec_fn=_die_with_parent)

    def _wait_ready(self, port, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            if self.exited():
                raise RuntimeError("\n".join(self.exited()))
            try:
                if request(port, "GET", "/readyz", timeout=2).status == 200:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the service on port {port} was not ready within {timeout} s")
            time.sleep(0.1)

    # -- calls -------------------------------------------------------------------
    def api(self, method, path, body=None, key=None):
        return request(self.gateway_port, method, path, body, key or self.app_key)

    def sql(self, db, statement):
        """Runs one statement on a database behind the services' backs (tests make differences this way)."""
        r = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(self.pg_port),
                            "-U", "postgres", "-d", db, "-c", statement], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"psql {db}: {r.stderr}")

    def arm_failpoint(self, shard, spec):
        r = request(self.shard_ports[shard], "POST", "/v1/admin/failpoints", {"spec": spec}, self.token)
        if r.status != 200:
            raise RuntimeError(f"arming {spec} on shard {shard}: {r}")


def raise_on_sigterm():
    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, interrupt)


if __name__ == "__main__":
    raise_on_sigterm()
    with Stack() as stack:
        print(f"console   http://127.0.0.1:{stack.gateway_port}/console/")
        print(f"operator  {stack.operator_key}\napp       {stack.app_key}")
        print(f"shards    {stack.shard_ports} (internal token {stack.token})")
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
