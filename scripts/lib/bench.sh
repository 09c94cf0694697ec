# Helpers the benchmark scripts share. Source after scripts/lib/servers.sh
# (and tally_pg_start, for postgres_cpu_seconds).

# Debian's interpreter, not whatever python3 comes first in PATH: only it
# sees python3-matplotlib.
py=/usr/bin/python3

free_port() {
  "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The readings below start no process: bash built-ins only, and
# record_cpu and http_get_to not even a subshell. They run at the start of
# a measured phase, where the CPU of a few short-lived processes (pgrep,
# awk: about 0.1 s) showed in the latency measured, and so did a fork of
# the script for each $(...) and a curl (together a 20-30 ms stall of the
# shard's open-loop latency, right when the measured phase began).
clk_tck=$(getconf CLK_TCK)
# _stat_fields PID: the fields of /proc/PID/stat after the command name
# (state, ppid, ...) in the array stat_fields; fails when PID is gone.
_stat_fields() {
  local line
  read -r line 2>/dev/null <"/proc/$1/stat" || return 1
  # shellcheck disable=SC2206 # numbers and a state letter, split on spaces
  stat_fields=(${line##*) })
}
# _as_seconds TICKS: sets seconds to TICKS in seconds (two decimals).
_as_seconds() {
  printf -v seconds '%d.%02d' $(($1 / clk_tck)) $(($1 % clk_tck * 100 / clk_tck))
}

# _process_seconds PID: sets seconds to the CPU (user + system) a process
# has used so far.
_process_seconds() {
  _stat_fields "$1" || return 1
  _as_seconds $((stat_fields[11] + stat_fields[12]))
}

# _postgres_seconds: sets seconds to the CPU used so far by our PostgreSQL
# server: the postmaster, its live children, and (through the postmaster's
# cutime and cstime) the children that have exited, such as the backends
# of closed connections. Other clusters on this machine are not ours to
# count.
_postgres_seconds() {
  local postmaster ticks pid children
  read -r postmaster <"$TALLY_PG_DATA/postmaster.pid"
  _stat_fields "$postmaster" || return 1
  ticks=$((stat_fields[11] + stat_fields[12] + stat_fields[13] + stat_fields[14]))
  read -ra children <"/proc/$postmaster/task/$postmaster/children" || true  # no newline at its end
  for pid in "${children[@]}"; do
    _stat_fields "$pid" && ticks=$((ticks + stat_fields[11] + stat_fields[12]))
  done
  _as_seconds "$ticks"
}

# Total CPU seconds used so far by our PostgreSQL server (_postgres_seconds).
postgres_cpu_seconds() {
  local seconds
  _postgres_seconds || return 1
  echo "$seconds"
}

# record_cpu FILE PID...: writes to FILE (/dev/stdout where no fork
# matters), on one line, the CPU seconds used so far by each PID and then by
# PostgreSQL.
record_cpu() {
  local file=$1 seconds line= pid
  shift
  for pid in "$@"; do
    _process_seconds "$pid" || seconds=0
    line+="$seconds "
  done
  _postgres_seconds || seconds=0
  printf '%s%s\n' "$line" "$seconds" >"$file"
}

# http_get_to FILE PORT PATH: GET http://127.0.0.1:PORT/PATH into FILE
# (status line and headers included) over bash's /dev/tcp; fails when
# nothing listens.
http_get_to() {
  local file=$1 port=$2 path=$3 fd line
  exec {fd}<>"/dev/tcp/127.0.0.1/$port" 2>/dev/null || return 1
  printf 'GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' "$path" >&"$fd"
  while IFS= read -r -t 5 line <&"$fd" || [[ -n $line ]]; do
    printf '%s\n' "${line%$'\r'}"
  done >"$file"
  exec {fd}>&-
}

# wait_measuring PROGRESS: waits (up to 2 minutes) until the load
# generator's progress file says its measured phase begins (after the
# accounts' set-up and any warm-up), so that what is read next leaves them
# out.
wait_measuring() {
  local _
  for _ in $(seq 1200); do
    grep -q ': measuring$' "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# pg_prepare_wal: gives the throwaway cluster (tally_pg_start) the WAL of a
# server in service. A fresh cluster creates, and fills with zeros, a new
# 16 MB segment each time its WAL crosses into one, and every commit waits
# for that (20-60 ms, several times a second at full load); a server that
# has been running recycles the segments that its checkpoints freed. So
# this creates min_wal_size worth of segments once, and pg_checkpoint frees
# them for the next run.
pg_prepare_wal() {
  local segments
  segments=$(psql -h "$TALLY_PG_HOST" -p "$TALLY_PG_PORT" -U postgres -X -qAt -d postgres -c "
    SELECT (SELECT setting::bigint FROM pg_settings WHERE name = 'min_wal_size')
         / (SELECT setting::bigint / 1048576 FROM pg_settings WHERE name = 'wal_segment_size')")
  { echo "CREATE TABLE wal_filler (x int);"
    for _ in $(seq "$segments"); do echo "INSERT INTO wal_filler VALUES (1); SELECT pg_switch_wal();"; done
    echo "DROP TABLE wal_filler;"
  } | psql -h "$TALLY_PG_HOST" -p "$TALLY_PG_PORT" -U postgres -X -q -d postgres -v ON_ERROR_STOP=1 >/dev/null
  pg_checkpoint
}

# pg_checkpoint: before each measured run, so that every run starts alike:
# no dirty pages left by the previous one, its WAL segments free for reuse.
pg_checkpoint() {
  psql -h "$TALLY_PG_HOST" -p "$TALLY_PG_PORT" -U postgres -X -q -d postgres -c CHECKPOINT
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

# statements_count DB...: with TALLY_PG_STATEMENTS=1, the number of
# statements the clients sent to the databases since statements_reset
# (top-level statements: one per round trip's statement, BEGIN and COMMIT
# included); else nothing.
statements_count() {
  [[ ${TALLY_PG_STATEMENTS:-0} == 1 ]] || return 0
  local db total=0 n
  for db in "$@"; do
    n=$(psql -h "$TALLY_PG_HOST" -p "$TALLY_PG_PORT" -U postgres -X -qAt -d "$db" -c "
      SELECT coalesce(sum(calls), 0) FROM pg_stat_statements
      WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())")
    total=$((total + n))
  done
  echo "$total"
}

# write_counts FILE DB...: what the databases have written so far, for the
# write volume per transfer: a line "wal BYTES" (the cluster's WAL position)
# and per database "db NAME BYTES INSERTED UPDATED DELETED HOT" (its size
# and the rows its tables took, from pg_stat_user_tables; the statistics
# are flushed at each transaction's end and at most every second).
write_counts() {
  local file=$1 db
  shift
  {
    psql -h "$TALLY_PG_HOST" -p "$TALLY_PG_PORT" -U postgres -X -qAt -d postgres \
      -c "SELECT 'wal ' || pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint"
    for db in "$@"; do
      psql -h "$TALLY_PG_HOST" -p "$TALLY_PG_PORT" -U postgres -X -qAt -F' ' -d "$db" -c "
        SELECT 'db', current_database(), pg_database_size(current_database()), coalesce(sum(n_tup_ins), 0),
               coalesce(sum(n_tup_upd), 0), coalesce(sum(n_tup_del), 0), coalesce(sum(n_tup_hot_upd), 0)
        FROM pg_stat_user_tables"
    done
  } >"$file"
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
