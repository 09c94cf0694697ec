# Helpers the benchmark scripts share. Source after scripts/lib/servers.sh
# (and tally_pg_start, for postgres_cpu_seconds).

# Debian's interpreter, not whatever python3 comes first in PATH: only it
# sees python3-matplotlib.
py=/usr/bin/python3

free_port() {
  "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Total CPU seconds (user + system) a process has used so far.
cpu_seconds() {
  awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/$1/stat"
}

# Total CPU seconds used so far by our PostgreSQL server: the postmaster,
# its live children, and (through the postmaster's cutime and cstime) the
# children that have exited, such as the backends of closed connections.
# Other clusters on this machine are not ours to count.
postgres_cpu_seconds() {
  local postmaster pid
  postmaster=$(head -n1 "$TALLY_PG_DATA/postmaster.pid")
  { awk '{ print $14 + $15 + $16 + $17 }' "/proc/$postmaster/stat"
    for pid in $(pgrep -P "$postmaster"); do awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || true; done
  } | awk -v hz="$(getconf CLK_TCK)" '{ s += $1 } END { printf "%.2f\n", s / hz }'
}

# wait_set_up PROGRESS: waits (up to 2 minutes) until the load generator's
# progress file says the accounts are opened and funded, so that what is
# measured next leaves the setup out.
wait_set_up() {
  local _
  for _ in $(seq 1200); do
    grep -q 'opened and funded' "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# statements_reset DB... and statements_report FILE DB...: with
# TALLY_PG_STATEMENTS=1 (see servers.sh), FILE gets the statements that cost
# the most in each database between the two; else nothing is written.
statements_reset() {
  [[ ${TALLY_PG_STATEMENTS:-0} == 1 ]] || return 0
  local db
  for db in "$@"; do
    psql -h "$TALLY_PG_HOST" -p "$TALLY_PG_PORT" -U postgres -X -q -d "$db" \
      -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" -c "SELECT pg_stat_statements_reset()" >/dev/null
  done
}
statements_report() {
  [[ ${TALLY_PG_STATEMENTS:-0} == 1 ]] || return 0
  local file=$1 db
  shift
  for db in "$@"; do
    echo "== $db"
    psql -h "$TALLY_PG_HOST" -p "$TALLY_PG_PORT" -U postgres -X -q -d "$db" -c "
      SELECT calls, round(total_exec_time) AS exec_ms, round(total_plan_time) AS plan_ms, rows,
             left(regexp_replace(query, '\s+', ' ', 'g'), 120) AS query
      FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
      ORDER BY total_exec_time + total_plan_time DESC LIMIT 15"
  done >"$file"
}

# Peak resident memory of a process, in kB.
peak_rss_kb() {
  awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"
}

# machine_info SETTINGS: what the figures were measured on.
machine_info() {
  echo "date: $(date -Is)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo none) (working tree may be dirty)"
  echo "cpu: $(nproc) x $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)"
  echo "memory: $(awk '/MemTotal/ { printf "%.1f GB", $2 / 1048576 }' /proc/meminfo)"
  echo "settings: $1"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
}
