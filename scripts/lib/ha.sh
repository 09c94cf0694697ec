# shellcheck shell=bash
# Replicated PostgreSQL on loopback for tests, chaos runs and `scripts/run
# --ha` (issue 29): one pg_auto_failover monitor, and per formation a
# primary and two standbys with synchronous_standby_names 'ANY 1 (…)', each
# node a keeper (pg_autoctl) and its PostgreSQL, run as user postgres in a
# directory of their own. Why pg_auto_failover and what it promises:
# docs/ha.md. Source after servers.sh.
#
#   tally_ha_start FORMATION...   the monitor, then three nodes per formation
#   tally_ha_uri FORMATION        its multi-host URI (target_session_attrs=read-write)
#   tally_ha_conninfo FORMATION DB  the same for database DB as user postgres
#   tally_ha_monitor_conninfo     the monitor's database (pgautofailover.node, perform_failover, which pg_autoctl perform switchover calls)
#   tally_ha_attach PORT          a monitor started elsewhere (compose-up --ha: a container)
#   tally_ha_wait_first FORMATION [S]  until its first node runs alone (state single)
#   tally_ha_wait FORMATION [S]   until it has a primary and two secondaries
#   tally_ha_until WHAT S CMD...  polls CMD every 0.2 s for up to S seconds
#   tally_ha_monitor_settings, tally_ha_server_settings, TALLY_HA_KEEPER_SETTINGS,
#   tally_ha_keeper_settings PGDATA CMD...  the timeouts and settings (below), for either form
#   tally_ha_state FORMATION      the monitor's view (pg_autoctl show state)
#   tally_ha_node_pid FORMATION N the process group of node N (1–3): its keeper and PostgreSQL
#   tally_ha_node_port FORMATION N, tally_ha_node_data FORMATION N  its port, its data directory
#   tally_ha_describe FORMATION   JSON for the chaos run: the monitor, the nodes, the keeper's command
#   tally_ha_stop                 stops every node and the monitor
#
# The monitor's health checks and the keepers' timeouts are lowered from
# pg_auto_failover's defaults (a failover in about 55 s) so that a lost
# primary is replaced in seconds (docs/ha.md, "Timeouts").

_tally_ha_dir=""
_tally_ha_monitor_pid=""
_tally_ha_monitor_port=""
_tally_ha_monitor=""
declare -A _tally_ha_ports=()  # "FORMATION N" -> port
declare -A _tally_ha_pids=()   # "FORMATION N" -> process group

_tally_ha_log() { echo "ha: $*" >&2; }

# _tally_ha_command VAR ARGS...: VAR becomes the command that runs
# pg_autoctl ARGS as postgres, its configuration and state under the HA
# directory; with _tally_ha_group set (as root), in that group, so that a
# node's traffic can be told apart (tally_ha_node_group).
_tally_ha_command() {
  local -n cmd=$1
  shift
  cmd=(env XDG_CONFIG_HOME="$_tally_ha_dir/config" XDG_DATA_HOME="$_tally_ha_dir/data"
    XDG_RUNTIME_DIR="$_tally_ha_dir/run" pg_autoctl "$@")
  if ((EUID == 0)); then
    if [[ -n ${_tally_ha_group:-} ]]; then
      cmd=(runuser -u postgres -g "$_tally_ha_group" -- "${cmd[@]}")
    else
      cmd=(runuser -u postgres -- "${cmd[@]}")
    fi
  fi
}

# The group that a node's keeper and PostgreSQL run in (as root; none
# otherwise): iptables' owner match then drops everything the node sends,
# which is how the chaos run cuts a node off the network on loopback.
tally_ha_node_group() { ((EUID == 0)) && echo "tally_pg_$1"; }

_tally_ha_ctl() {
  local command
  _tally_ha_command command "$@"
  "${command[@]}"
}

# _tally_ha_spawn LOG ARGS...: pg_autoctl ARGS in a process group of its own
# (so that a node's keeper and PostgreSQL can be killed together); sets
# _tally_ha_spawned to its pid, which is the group's id.
_tally_ha_spawn() {
  local log=$1 command
  shift
  _tally_ha_command command "$@"
  setsid "${command[@]}" >"$log" 2>&1 </dev/null &
  _tally_ha_spawned=$!
  disown  # its end (a node killed on purpose) is no job of the script's to report
}

# Whether no process of the group PID is left.
_tally_ha_gone() { ! kill -0 -- "-$1" 2>/dev/null; }

_tally_ha_healthy() { _tally_ha_count "$1" primary 1 && _tally_ha_count "$1" secondary 2; }

# The monitor's URI, read once it is up: two pg_autoctl processes creating
# their state directories at once can fail on each other's mkdir.
_tally_ha_monitor_uri() { echo "$_tally_ha_monitor"; }
_tally_ha_monitor_ready() { _tally_ha_monitor_sql "SELECT count(*) FROM pgautofailover.formation"; }

# tally_ha_until DESCRIPTION SECONDS COMMAND...: polls COMMAND every 0.2 s.
tally_ha_until() {
  local what=$1 seconds=$2 deadline
  shift 2
  deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      _tally_ha_log "$what: not within ${seconds}s"
      return 1
    fi
    sleep 0.2
  done
}

# _tally_ha_monitor_sql SQL: statements on the monitor's database as its
# owner, one transaction each.
tally_ha_monitor_conninfo() { echo "host=127.0.0.1 port=$_tally_ha_monitor_port user=postgres dbname=pg_auto_failover"; }

_tally_ha_monitor_sql() {
  psql "$(tally_ha_monitor_conninfo)" -XAtq -F ' ' -v ON_ERROR_STOP=1 <<<"$1"
}

# _tally_ha_states FORMATION: one line per node, "name reported_state goal_state".
_tally_ha_states() {
  _tally_ha_monitor_sql "SELECT nodename, reportedstate, goalstate FROM pgautofailover.node
    WHERE formationid = '$1' ORDER BY nodeid"
}

# _tally_ha_count FORMATION STATE N: whether N nodes report and are assigned STATE.
_tally_ha_count() {
  [[ $(_tally_ha_states "$1" | awk -v s="$2" '$2 == s && $3 == s' | wc -l) -ge $3 ]]
}

tally_ha_start() {
  command -v pg_autoctl >/dev/null || {
    _tally_ha_log "pg_autoctl is missing (scripts/install-deps installs pg-auto-failover-cli)"
    return 1
  }
  _tally_dir _tally_ha_dir ha "${TALLY_HA_DIR:-}"
  mkdir -p "$_tally_ha_dir"/{config,data,run}
  ((EUID == 0)) && chown -R postgres:postgres "$_tally_ha_dir"
  local port formation n
  port=$(_tally_free_port)
  _tally_ha_monitor_port=$port
  _tally_ha_spawn "$_tally_ha_dir/monitor.log" create monitor --pgctl "$TALLY_PG_BIN/pg_ctl" \
    --pgdata "$_tally_ha_dir/monitor" --pgport "$port" --hostname 127.0.0.1 --auth trust --no-ssl --run
  _tally_ha_monitor_pid=$_tally_ha_spawned
  tally_ha_attach "$port" || return 1
  _tally_ha_log "monitor on 127.0.0.1:$port ($_tally_ha_dir)"
  for formation in "$@"; do
    _tally_ha_ctl create formation --monitor "$(_tally_ha_monitor_uri)" --formation "$formation" --kind pgsql \
      --dbname postgres >/dev/null || return 1
    for n in 1 2 3; do
      port=$(_tally_free_port)
      _tally_ha_ports["$formation $n"]=$port
      local _tally_ha_group
      _tally_ha_group=$(tally_ha_node_group "$port") && groupadd -f "$_tally_ha_group"
      _tally_ha_spawn "$_tally_ha_dir/$formation-$n.log" create postgres \
        --pgctl "$TALLY_PG_BIN/pg_ctl" --pgdata "$_tally_ha_dir/$formation-$n" --pgport "$port" \
        --listen 127.0.0.1 --hostname 127.0.0.1 --name "${formation}_$n" --formation "$formation" \
        --dbname postgres --monitor "$(_tally_ha_monitor_uri)" --auth trust --no-ssl --run
      _tally_ha_pids["$formation $n"]=$_tally_ha_spawned
      _tally_ha_group=""
      # One node at a time: the first becomes the primary, the others clone it.
      if ((n == 1)); then
        tally_ha_wait_first "$formation" || return 1
        tally_ha_server_settings | psql "host=127.0.0.1 port=$port user=postgres dbname=postgres" -Xq \
          -v ON_ERROR_STOP=1 >/dev/null || return 1
      else
        tally_ha_until "$formation's node $n" 180 _tally_ha_count "$formation" secondary $((n - 1)) || return 1
      fi
      tally_ha_keeper_settings "$_tally_ha_dir/$formation-$n" _tally_ha_ctl || return 1
    done
    tally_ha_wait "$formation" 60 || return 1
    _tally_ha_log "$formation: $(tally_ha_uri "$formation")"
  done
}

# The keepers' timeouts, each "name value" (every node: any may become the
# primary): a primary cut off from the monitor and its standbys fences itself
# after 5 s; a PostgreSQL that fails to start is given up after one retry of
# 3 s; a standby being promoted waits at most 2 s for its WAL receiver to
# stop (default 5 s: the promotion's longest step on a lost primary).
TALLY_HA_KEEPER_SETTINGS=("timeout.network_partition_timeout 5" "timeout.postgresql_restart_failure_timeout 3"
  "timeout.postgresql_restart_failure_max_retries 1" "timeout.prepare_promotion_walreceiver 2")

# tally_ha_monitor_settings: SQL for the monitor. Health checks every second,
# a node unhealthy after 3 s without its keeper and a failed check, and the
# old primary's drain wait at 2 s (above nothing: with synchronous standbys a
# fenced-off primary cannot acknowledge a commit anyway).
tally_ha_monitor_settings() {
  cat <<'SQL'
ALTER SYSTEM SET pgautofailover.health_check_period = 1000;
ALTER SYSTEM SET pgautofailover.health_check_timeout = 1000;
ALTER SYSTEM SET pgautofailover.health_check_max_retries = 1;
ALTER SYSTEM SET pgautofailover.health_check_retry_delay = 500;
ALTER SYSTEM SET pgautofailover.node_considered_unhealthy_timeout = 3000;
ALTER SYSTEM SET pgautofailover.primary_demote_timeout = 2000;
SELECT pg_reload_conf();
SQL
}

# tally_ha_server_settings: SQL for a formation's first node (the standbys
# clone it): WAL settings for this machine (pg_autoctl's own defaults keep
# 8 GB of WAL per node for standbys that fall behind), and messages in
# English, which the services' client reads (docs/ha.md).
tally_ha_server_settings() {
  cat <<'SQL'
ALTER SYSTEM SET wal_keep_size = '512MB';
ALTER SYSTEM SET wal_compression = 'lz4';
ALTER SYSTEM SET max_wal_size = '2GB';
ALTER SYSTEM SET lc_messages = 'C';
SELECT pg_reload_conf();
SQL
}

# tally_ha_keeper_settings PGDATA PG_AUTOCTL...: TALLY_HA_KEEPER_SETTINGS in
# the file of the keeper of PGDATA, where PG_AUTOCTL... runs pg_autoctl as
# the node's user. A running keeper that rewrites its file before it has
# reloaded it undoes a `config set` (seen), so the values are set again
# until they have held for 3 s.
tally_ha_keeper_settings() {
  local since="" deadline=$((SECONDS + 60))
  while ((SECONDS < deadline)); do
    if _tally_ha_keeper_settings_hold "$@"; then
      [[ -z $since ]] && since=$SECONDS
      ((SECONDS - since >= 3)) && return 0
    else
      since=""
    fi
    sleep 0.2
  done
  _tally_ha_log "$1: the keeper's settings did not hold"
  return 1
}

# _tally_ha_keeper_settings_hold PGDATA PG_AUTOCTL...: whether the file holds
# every value; sets those it does not.
_tally_ha_keeper_settings_hold() {
  local pgdata=$1 setting name value held=0
  shift
  for setting in "${TALLY_HA_KEEPER_SETTINGS[@]}"; do
    read -r name value <<<"$setting"
    if [[ $("$@" config get --pgdata "$pgdata" "$name" 2>/dev/null) != "$value" ]]; then
      held=1
      "$@" config set --pgdata "$pgdata" "$name" "$value" >/dev/null 2>&1 || true
    fi
  done
  return $held
}

tally_ha_uri() { _tally_ha_ctl show uri --monitor "$(_tally_ha_monitor_uri)" --formation "$1"; }

tally_ha_conninfo() {
  local uri
  uri=$(tally_ha_uri "$1")
  uri=${uri/\/postgres\?//$2?}
  echo "postgres://postgres@${uri#postgres://}"
}

# tally_ha_attach PORT: the monitor on PORT (started here, or in a container)
# once it answers, with the timeouts of tally_ha_monitor_settings.
tally_ha_attach() {
  _tally_ha_monitor_port=$1
  _tally_ha_monitor="postgres://autoctl_node@127.0.0.1:$1/pg_auto_failover?sslmode=prefer"
  tally_ha_until "the monitor" 120 _tally_ha_monitor_ready || return 1
  _tally_ha_monitor_sql "$(tally_ha_monitor_settings)" >/dev/null
}

tally_ha_wait_first() { tally_ha_until "$1's first node" "${2:-120}" _tally_ha_count "$1" single 1; }

tally_ha_wait() { tally_ha_until "$1: a primary and two secondaries" "${2:-60}" _tally_ha_healthy "$1"; }

tally_ha_state() { _tally_ha_ctl show state --monitor "$(_tally_ha_monitor_uri)" --formation "$1"; }

tally_ha_node_pid() { echo "${_tally_ha_pids["$1 $2"]}"; }
tally_ha_node_port() { echo "${_tally_ha_ports["$1 $2"]}"; }
tally_ha_node_data() { echo "$_tally_ha_dir/$1-$2"; }

tally_ha_stop() {
  local key pid group
  for key in "${!_tally_ha_pids[@]}"; do
    pid=${_tally_ha_pids[$key]}
    kill -TERM -- "-$pid" 2>/dev/null || true
  done
  if [[ -n $_tally_ha_monitor_pid ]]; then kill -TERM -- "-$_tally_ha_monitor_pid" 2>/dev/null || true; fi
  for key in "${!_tally_ha_pids[@]}"; do
    pid=${_tally_ha_pids[$key]}
    tally_ha_until "node $key to stop" 30 _tally_ha_gone "$pid" || kill -KILL -- "-$pid" 2>/dev/null || true
  done
  if [[ -n $_tally_ha_monitor_pid ]]; then
    tally_ha_until "the monitor to stop" 30 _tally_ha_gone "$_tally_ha_monitor_pid" ||
      kill -KILL -- "-$_tally_ha_monitor_pid" 2>/dev/null || true
  fi
  for key in "${!_tally_ha_ports[@]}"; do
    group=$(tally_ha_node_group "${_tally_ha_ports[$key]}") && groupdel "$group" 2>/dev/null
  done
  _tally_ha_pids=()
  _tally_ha_ports=()
  _tally_ha_monitor_pid=""
  _tally_ha_monitor=""
}

# tally_ha_describe FORMATION: {"formation", "monitor_port", "ctl",
# "nodes": [{"n", "port", "data", "group", "ctl", "pgid", "log"}]}, where ctl is the command
# that runs pg_autoctl as this helper does (as postgres, its state under the
# HA directory) and pgid each node's process group, for a run that kills and
# restarts nodes itself (tests/chaos/tally_chaos/ha.py).
tally_ha_describe() {
  local command node_command n port group nodes=()
  _tally_ha_command command
  for n in 1 2 3; do
    port=${_tally_ha_ports["$1 $n"]}
    group=$(tally_ha_node_group "$port") || group=""
    _tally_ha_group=$group _tally_ha_command node_command
    nodes+=("{\"n\": $n, \"port\": $port, \"data\": \"$_tally_ha_dir/$1-$n\", \"group\": \"$group\",
      \"ctl\": $(_tally_ha_json_list "${node_command[@]}"), \"pgid\": ${_tally_ha_pids["$1 $n"]},
      \"log\": \"$_tally_ha_dir/$1-$n.log\"}")
  done
  printf '{"formation": "%s", "monitor_port": %s, "ctl": %s, "nodes": [%s]}\n' \
    "$1" "$_tally_ha_monitor_port" "$(_tally_ha_json_list "${command[@]}")" \
    "$(IFS=,; echo "${nodes[*]}")"
}

# _tally_ha_json_list WORDS...: a JSON list of strings.
_tally_ha_json_list() {
  printf '%s\n' "$@" | /usr/bin/python3 -c 'import json, sys; print(json.dumps(sys.stdin.read().split("\n")[:-1]))'
}
