# shellcheck shell=bash
# Throwaway PostgreSQL 15 and Redis servers on loopback for tests, benchmarks
# and the local stack. Source this file, then:
#
#   tally_cleanup_on_exit          # stop everything and remove temp dirs on exit
#   tally_pg_start [DIR]           # exports TALLY_PG_HOST/PORT/USER/DATA
#   tally_redis_start [DIR]        # exports TALLY_REDIS_HOST/PORT/DIR
#
# Without DIR a directory is made with mktemp under /tmp and removed at
# cleanup; a DIR given by the caller is left in place. PostgreSQL refuses to
# run as root, so when called as root the cluster belongs to the `postgres`
# user, and DIR must be reachable by it (anywhere under /tmp is).
# With TALLY_PG_STATEMENTS=1 the cluster loads pg_stat_statements (planning
# tracked too), for the benchmarks' statement reports.

TALLY_PG_BIN=${TALLY_PG_BIN:-/usr/lib/postgresql/15/bin}

_tally_pg_dirs=()     # clusters started, for cleanup
_tally_redis_dirs=()  # redis servers started, for cleanup
_tally_temp_dirs=()   # directories made here, removed at cleanup

_tally_log() { echo "servers: $*" >&2; }

# Asks the kernel for a free port. Another process may take it before the
# server binds it, which is why the start functions retry on a bind failure.
_tally_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# _tally_start_on_free_port NAME LOG TAKEN START: runs START PORT on a free
# port, again on another (5 attempts in all) while START fails and LOG
# matches TAKEN (a grep pattern: the port was taken); when it gives up,
# the end of LOG.
_tally_start_on_free_port() {
  local name=$1 log=$2 taken=$3 start=$4 attempt port
  for attempt in 1 2 3 4 5; do
    port=$(_tally_free_port)
    "$start" "$port" && return 0
    grep -q "$taken" "$log" || break
    _tally_log "$name: port $port taken, retrying (attempt $attempt)"
  done
  _tally_failed "$name: start" "$log"
}

# _tally_failed WHAT LOG: says that WHAT failed, with the end of LOG; returns 1.
_tally_failed() {
  _tally_log "$1 failed; end of $2:"
  tail -n 20 "$2" >&2
  return 1
}

_tally_as_pg() {
  if ((EUID == 0)); then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# _tally_dir VAR PREFIX [DIR]: sets VAR to DIR (created if missing) or to a
# new temp dir that cleanup removes. An output variable rather than $(...) so
# the temp dir is recorded in this shell, not a subshell.
_tally_dir() {
  local -n out=$1
  if [[ -n ${3:-} ]]; then
    mkdir -p "$3"
    out=$(cd "$3" && pwd)
  else
    out=$(mktemp -d "/tmp/tally-$2.XXXXXX")
    _tally_temp_dirs+=("$out")
  fi
}

tally_pg_start() {
  local dir
  _tally_dir dir pg "${1:-}"
  if [[ -n $(ls -A "$dir") ]]; then
    _tally_log "pg: $dir is not empty"
    return 1
  fi
  if ((EUID == 0)); then
    chown postgres:postgres "$dir"
  fi
  chmod 700 "$dir"
  _tally_pg_dirs+=("$dir")

  # Trust auth is fine: the server listens on 127.0.0.1 and a socket inside
  # DIR only. No --no-sync: the cluster should be as durable as the
  # benchmarks assume.
  local out
  if ! out=$(_tally_as_pg "$TALLY_PG_BIN/initdb" -D "$dir" -U postgres --auth=trust --encoding=UTF8 \
    --locale=C.UTF-8 2>&1); then
    _tally_log "pg: initdb failed:"
    echo "$out" >&2
    return 1
  fi

  # Settings for a benchmark machine; fsync and synchronous_commit stay on so
  # commit latencies are real. Large WAL limits keep checkpoints out of short
  # runs. The port lives in its own included file so a retry can rewrite it.
  _tally_as_pg tee -a "$dir/postgresql.conf" >/dev/null <<CONF

# Tally test server (scripts/lib/servers.sh)
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
max_connections = 300
shared_buffers = 256MB
fsync = on
synchronous_commit = on
full_page_writes = on
# Full-page images compressed (docs/benchmarks.md, "Where a transfer's WAL goes").
wal_compression = lz4
wal_buffers = 16MB
max_wal_size = 4GB
min_wal_size = 1GB
checkpoint_timeout = 15min
checkpoint_completion_target = 0.9
effective_cache_size = 1GB
log_min_messages = warning
log_line_prefix = '%m [%p] '
include 'tally_port.conf'
CONF
  if [[ ${TALLY_PG_STATEMENTS:-0} == 1 ]]; then
    printf "shared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.track_planning = on\n" |
      _tally_as_pg tee -a "$dir/postgresql.conf" >/dev/null
  fi

  _tally_start_on_free_port pg "$dir/server.log" 'could not bind\|Address already in use' _tally_pg_listen
}

# _tally_pg_listen PORT: starts the cluster in $dir (tally_pg_start's) on PORT.
_tally_pg_listen() {
  echo "port = $1" | _tally_as_pg tee "$dir/tally_port.conf" >/dev/null
  _tally_as_pg "$TALLY_PG_BIN/pg_ctl" start -w -t 60 -D "$dir" -l "$dir/server.log" >/dev/null || return 1
  export TALLY_PG_HOST=127.0.0.1 TALLY_PG_PORT=$1 TALLY_PG_USER=postgres TALLY_PG_DATA=$dir
  _tally_log "pg: listening on 127.0.0.1:$1 (data $dir)"
}

# tally_pg_stop [DIR]: fast shutdown (rolls back open transactions); DIR
# defaults to $TALLY_PG_DATA. A cluster that is not running is fine.
tally_pg_stop() {
  local dir=${1:-${TALLY_PG_DATA:-}}
  [[ -n $dir && -f $dir/PG_VERSION ]] || return 0
  if _tally_as_pg "$TALLY_PG_BIN/pg_ctl" status -D "$dir" >/dev/null 2>&1; then
    _tally_as_pg "$TALLY_PG_BIN/pg_ctl" stop -w -t 60 -D "$dir" -m fast >/dev/null
  fi
}

# tally_pg_restart_immediate [DIR]: an abrupt stop (no checkpoint, like a
# crash; the restart runs crash recovery) and a start on the same port.
tally_pg_restart_immediate() {
  local dir=${1:-${TALLY_PG_DATA:-}}
  if [[ -z $dir ]]; then
    _tally_log "pg: no cluster to restart"
    return 1
  fi
  _tally_as_pg "$TALLY_PG_BIN/pg_ctl" stop -w -D "$dir" -m immediate >/dev/null 2>&1 || true
  _tally_as_pg "$TALLY_PG_BIN/pg_ctl" start -w -t 60 -D "$dir" -l "$dir/server.log" >/dev/null ||
    _tally_failed "pg: restart" "$dir/server.log"
}

tally_redis_start() {
  local dir
  _tally_dir dir redis "${1:-}"
  _tally_redis_dirs+=("$dir")

  _tally_start_on_free_port redis "$dir/redis.log" 'Address already in use' _tally_redis_listen
}

# _tally_redis_listen PORT: starts a server in $dir (tally_redis_start's) on
# PORT and waits until it answers, or its log says the port was taken.
_tally_redis_listen() {
  local port=$1
  : >"$dir/redis.log"
  # No persistence: tests start from an empty cache and nothing is written
  # behind their back.
  redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
    --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --dir "$dir"
  # The daemon binds after forking, so a taken port shows only in its log.
  for _ in $(seq 100); do
    # timeout: whatever else holds a taken port may never answer.
    if [[ $(timeout 1 redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null) == PONG ]]; then
      export TALLY_REDIS_HOST=127.0.0.1 TALLY_REDIS_PORT=$port TALLY_REDIS_DIR=$dir
      _tally_log "redis: listening on 127.0.0.1:$port (dir $dir)"
      return 0
    fi
    grep -q 'Address already in use' "$dir/redis.log" && return 1
    sleep 0.1
  done
  return 1
}

# tally_redis_stop [DIR]: DIR defaults to $TALLY_REDIS_DIR. A server that is
# not running is fine.
tally_redis_stop() {
  local dir=${1:-${TALLY_REDIS_DIR:-}}
  [[ -n $dir && -f $dir/redis.pid ]] || return 0
  local pid
  pid=$(cat "$dir/redis.pid")
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$dir/redis.pid"
}

_tally_cleanup() {
  local dir
  # Replicated clusters (ha.sh), when a script started some.
  if declare -F tally_ha_stop >/dev/null; then tally_ha_stop || true; fi
  for dir in "${_tally_redis_dirs[@]}"; do tally_redis_stop "$dir" || true; done
  for dir in "${_tally_pg_dirs[@]}"; do tally_pg_stop "$dir" || true; done
  for dir in "${_tally_temp_dirs[@]}"; do rm -rf "$dir"; done
  _tally_redis_dirs=()
  _tally_pg_dirs=()
  _tally_temp_dirs=()
}

# Replaces any EXIT/INT/TERM trap of the caller. The exit status of the
# script is kept; a signal ends it with 128+signal after the cleanup.
tally_cleanup_on_exit() {
  trap '_tally_cleanup' EXIT
  trap '_tally_cleanup; trap - EXIT; exit 130' INT
  trap '_tally_cleanup; trap - EXIT; exit 143' TERM
}
