"""The replicated cluster of an --ha run: one pg_auto_failover formation (a
primary and two synchronous-quorum standbys) holding every shard's database
(tally_0 .. tally_2) and the saga store (tally_3). Formation finds the
primary from the monitor and cuts a node off the network (iptables on
loopback, by its processes' group and its port); each form makes the other
faults of issue 29 its own way: the node lost (keeper and PostgreSQL killed
together, started again later as a host that comes back), the postmaster
killed alone, the node stalled past the monitor's timeouts, and a planned
switchover. LocalFormation is the local form's, started by scripts/chaos
with scripts/lib/ha.sh and described in TALLY_CHAOS_HA
(tally_ha_describe); tally_chaos.compose has compose.yaml's."""
import os
import signal
import subprocess
import threading
import time

import psycopg2


class Node:
    def __init__(self, n, name, port, group):
        self.n, self.name, self.port = n, name, port  # its number, its name on the monitor
        self.group = group  # its processes' group, for the cut ("" where there is none)
        self.cut_off = False

    def cut_rules(self):
        """iptables rules that cut the node off loopback: everything its
        processes send (its keeper to the monitor, its PostgreSQL's answers
        and WAL) and everything sent to its PostgreSQL."""
        return [["OUTPUT", "-o", "lo", "-m", "owner", "--gid-owner", self.group, "-j", "DROP"],
                ["INPUT", "-i", "lo", "-p", "tcp", "--dport", str(self.port), "-j", "DROP"]]


class LocalNode(Node):
    def __init__(self, formation, spec):
        super().__init__(spec["n"], f"{formation}_{spec['n']}", spec["port"], spec["group"])
        self.data, self.pgid, self.log = spec["data"], spec["pgid"], spec["log"]
        self.ctl = spec["ctl"]  # its keeper's command
        self.started = None  # the keeper this run started again, if any

    def postmaster_pid(self):
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            return int(f.readline())

    def processes(self):
        """Every process of the node: its process group (keeper and
        postmaster) and the postmaster's children, which PostgreSQL puts in
        sessions of their own."""
        try:
            postmaster = self.postmaster_pid()
        except (OSError, ValueError):
            postmaster = None
        out = []
        for pid, ppid, pgrp in proc_table():
            if pgrp == self.pgid or (postmaster is not None and ppid == postmaster):
                out.append(pid)
        return out

    def signal(self, sig):
        """As a machine that stops or dies: every process at once."""
        for pid in self.processes():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass


def proc_table():
    """(pid, parent pid, process group) of every process."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        yield int(entry), int(fields[1]), int(fields[2])


class Formation:
    """What both forms share: the monitor's view and the network cut."""

    def __init__(self, formation, monitor_port, nodes, log):
        self.formation, self.monitor_port, self.nodes, self.log = formation, monitor_port, nodes, log
        self.hosts = ",".join(f"127.0.0.1:{node.port}" for node in nodes)
        self.lock = threading.Lock()

    def conninfo(self, db):
        """Every host of the formation; libpq picks the one that takes writes."""
        return f"postgresql://postgres@{self.hosts}/{db}?target_session_attrs=read-write&connect_timeout=2"

    def monitor_conninfo(self):
        """The monitor's database, for the gateway's view of the clusters."""
        return f"host=127.0.0.1 port={self.monitor_port} user=postgres dbname=pg_auto_failover"

    def states(self):
        """{node name: (reported state, goal state)} from the monitor."""
        c = psycopg2.connect(host="127.0.0.1", port=self.monitor_port, user="postgres", dbname="pg_auto_failover",
                             connect_timeout=3)
        try:
            with c.cursor() as cur:
                cur.execute("SELECT nodename, reportedstate::text, goalstate::text FROM pgautofailover.node"
                            " WHERE formationid = %s", (self.formation,))
                return {name: (reported, goal) for name, reported, goal in cur.fetchall()}
        finally:
            c.close()

    def healthy(self):
        """A primary and two secondaries, each where the monitor wants it."""
        try:
            settled = [r for r, g in self.states().values() if r == g]
        except psycopg2.Error:
            return False
        return settled.count("primary") == 1 and settled.count("secondary") == 2

    def wait_healthy(self, timeout_s):
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if self.healthy():
                return True
            time.sleep(0.5)
        return False

    def primary(self):
        states = self.states()
        for node in self.nodes:
            if states.get(node.name) == ("primary", "primary"):
                return node
        return None

    def switchover_args(self):
        """pg_autoctl's arguments for a planned switchover, which return once
        the monitor reports it done."""
        monitor = f"postgresql://autoctl_node@127.0.0.1:{self.monitor_port}/pg_auto_failover"
        return ["perform", "switchover", "--monitor", monitor, "--formation", self.formation]

    def can_cut(self):
        """A cut needs each node in a group of its own (scripts/lib/ha.sh does
        that as root) and iptables."""
        return all(n.group for n in self.nodes) and subprocess.run(
            ["iptables", "-w", "-L", "OUTPUT", "-n"], capture_output=True).returncode == 0

    def cut(self, node, back_after_s):
        """Cuts the node off the network (its processes keep running, as a
        machine behind a failed switch) and joins it again after
        back_after_s: its keeper must fence it, the monitor promote another,
        and the node rejoin as a standby."""
        for rule in node.cut_rules():
            subprocess.run(["iptables", "-w", "-I"] + rule, check=True, capture_output=True)
        node.cut_off = True
        threading.Timer(back_after_s, self.heal, args=(node,)).start()

    def heal(self, node):
        with self.lock:
            if not node.cut_off:
                return
            for rule in node.cut_rules():
                subprocess.run(["iptables", "-w", "-D"] + rule, capture_output=True)
            node.cut_off = False
        self.log(f"ha: node {node.n} is on the network again")


class LocalFormation(Formation):
    """The local form's: the nodes are process groups of this machine."""

    def __init__(self, spec, log):
        super().__init__(spec["formation"], spec["monitor_port"],
                         [LocalNode(spec["formation"], n) for n in spec["nodes"]], log)
        self.ctl = spec["ctl"]

    # -- faults --------------------------------------------------------------------
    def lose(self, node, back_after_s):
        """Kills the node's keeper and PostgreSQL together; its host comes
        back after back_after_s: the keeper starts again and rejoins the
        formation as a standby of the new primary (pg_rewind)."""
        node.signal(signal.SIGKILL)
        threading.Timer(back_after_s, self.start_keeper, args=(node,)).start()

    def start_keeper(self, node):
        with self.lock:
            log = open(node.log, "ab")
            node.started = subprocess.Popen(node.ctl + ["run", "--pgdata", node.data], stdout=log, stderr=log,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
            log.close()
            node.pgid = node.started.pid
        self.log(f"ha: node {node.n} is back (keeper {node.pgid})")

    def kill_postmaster(self, node):
        """Only the postmaster: its keeper starts it again in place."""
        os.kill(node.postmaster_pid(), signal.SIGKILL)

    def stall(self, node, for_s):
        """SIGSTOP of the node's keeper and PostgreSQL, SIGCONT after for_s:
        a primary that wakes up after its failover must take no write."""
        node.signal(signal.SIGSTOP)
        threading.Timer(for_s, node.signal, args=(signal.SIGCONT,)).start()

    def switchover(self):
        subprocess.run(self.ctl + self.switchover_args(), check=True, capture_output=True, timeout=120)

    def stop(self):
        """Ends the keepers this run started (scripts/lib/ha.sh stops the
        ones it started) and wakes any node left stopped."""
        for node in self.nodes:
            self.heal(node)
            node.signal(signal.SIGCONT)
            if node.started is not None and node.started.poll() is None:
                os.killpg(node.pgid, signal.SIGTERM)
                try:
                    node.started.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(node.pgid, signal.SIGKILL)

    def postgres_logs(self):
        out = []
        for node in self.nodes:
            logs = os.path.join(node.data, "log")
            if os.path.isdir(logs):
                out += [(f"node {node.n}", os.path.join(logs, f)) for f in sorted(os.listdir(logs))]
        return out
