# The end-to-end stack the gateway benchmarks run: two account_shards, the
# orchestrator, the relay and the gateway on fresh databases, and a
# saga_bench run against it with the CPU of every process read around the
# measured phase. Source after servers.sh and bench.sh; start the servers
# (tally_pg_start, tally_redis_start) before stack_start. Uses (and sets)
# these globals:
#   results, token, api_key, accounts, connections, duration, warmup
#   pids (every service started; stop_services stops them)
# and, when set, operator_key (a second API key of the tenant, role
# operator) and stack_shard_args, stack_orch_args and stack_relay_args
# (more arguments for each account_shard, the orchestrator, the relay).
pg_admin() { psql -h "$TALLY_PG_HOST" -p "$TALLY_PG_PORT" -U postgres -X -q -v ON_ERROR_STOP=1 -d postgres "$@"; }
conninfo() { echo "host=$TALLY_PG_HOST port=$TALLY_PG_PORT user=postgres dbname=$1"; }

pids=()
stack_shard_args=()
stack_orch_args=()
stack_relay_args=()
stop_services() {
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}

wait_ready() {
  local _
  for _ in $(seq 150); do
    curl -sf "http://127.0.0.1:$1/readyz" >/dev/null && return 0
    sleep 0.1
  done
  echo "the service on port $1 did not start" >&2
  return 1
}

# stack_start BIN NAME [DB]: starts the services built in BIN (a build
# directory) on fresh databases bench_NAME_{s0,s1,sagas} (Redis flushed),
# or with DB on the existing databases DB_{s0,s1,sagas}, which stack_stop
# keeps (Redis as it is: it holds their projections); their logs in
# RESULTS/NAME.*.log, and waits until they are ready. Sets stack_db,
# stack_spec (the shards' routing), stack_orch_port, stack_gw_port,
# stack_relay_port, stack_shard_ports, stack_gw_pid and stack_watched
# (orchestrator, shard0, shard1, gateway, relay, redis: whose CPU is read).
stack_start() {
  local bin=$1 name=$2 i port
  stack_db=${3:-bench_${name//[.-]/_}}
  stack_fresh=1
  [[ -n ${3:-} ]] && stack_fresh=0
  stack_spec=""
  stack_shard_ports=()
  local shard_pids=()
  ((stack_fresh)) && redis-cli -p "$TALLY_REDIS_PORT" flushall >/dev/null
  for i in 0 1; do
    ((stack_fresh)) && pg_admin -c "CREATE DATABASE ${stack_db}_s$i"
    port=$(free_port)
    TALLY_SHARD_DATABASE_CONNINFO=$(conninfo "${stack_db}_s$i") TALLY_SHARD_INTERNAL_TOKEN=$token \
      "$bin/account_shard/account_shard" --listen.port="$port" --log.level=warn "${stack_shard_args[@]}" \
      >"$results/$name.s$i.log" 2>&1 &
    pids+=($!)
    shard_pids+=($!)
    stack_shard_ports+=("$port")
    stack_spec+="${stack_spec:+;}s$i=127.0.0.1:$port"
  done
  ((stack_fresh)) && pg_admin -c "CREATE DATABASE ${stack_db}_sagas"
  pg_checkpoint
  local gw_internal_port orch_pid relay_pid sources
  stack_orch_port=$(free_port)
  stack_gw_port=$(free_port)
  gw_internal_port=$(free_port)
  stack_relay_port=$(free_port)
  TALLY_ORCH_DATABASE_CONNINFO=$(conninfo "${stack_db}_sagas") TALLY_ORCH_INTERNAL_TOKEN=$token \
    "$bin/orchestrator/orchestrator" --listen.port="$stack_orch_port" --shards="$stack_spec" --log.level=warn \
    "${stack_orch_args[@]}" >"$results/$name.orchestrator.log" 2>&1 &
  orch_pid=$!
  pids+=("$orch_pid")
  local keys
  keys="bench:app:$(printf '%s' "$api_key" | sha256sum | cut -d' ' -f1)"
  [[ -n ${operator_key:-} ]] && keys+=";bench:operator:$(printf '%s' "$operator_key" | sha256sum | cut -d' ' -f1)"
  TALLY_GATEWAY_INTERNAL_TOKEN=$token TALLY_GATEWAY_API_KEYS=$keys \
    "$bin/gateway/gateway" --listen.port="$stack_gw_port" --internal.port="$gw_internal_port" \
    --orchestrator="127.0.0.1:$stack_orch_port" --shards="$stack_spec" --redis.port="$TALLY_REDIS_PORT" \
    --limits.key_rate=1000000 --limits.key_burst=1000000 --log.level=warn >"$results/$name.gateway.log" 2>&1 &
  stack_gw_pid=$!
  pids+=("$stack_gw_pid")
  sources=$(printf '[{"name":"s0","kind":"shard","conninfo":"%s"},{"name":"s1","kind":"shard","conninfo":"%s"},{"name":"orchestrator","kind":"orchestrator","conninfo":"%s"}]' \
    "$(conninfo "${stack_db}_s0")" "$(conninfo "${stack_db}_s1")" "$(conninfo "${stack_db}_sagas")")
  TALLY_RELAY_SOURCES=$sources TALLY_RELAY_INTERNAL_TOKEN=$token \
    "$bin/relay/relay" --listen.port="$stack_relay_port" --redis.port="$TALLY_REDIS_PORT" \
    --gateways="g0=127.0.0.1:$gw_internal_port" --log.level=warn "${stack_relay_args[@]}" \
    >"$results/$name.relay.log" 2>&1 &
  relay_pid=$!
  pids+=("$relay_pid")
  for port in "$stack_orch_port" "$stack_gw_port" "$stack_relay_port"; do wait_ready "$port"; done
  stack_watched=("$orch_pid" "${shard_pids[@]}" "$stack_gw_pid" "$relay_pid" "$(cat "$TALLY_REDIS_DIR/redis.pid")")
}

# stack_bench SAGA_BENCH NAME VIA [RATE [SUBSCRIBERS [HOT]]]: one saga_bench
# run against the started stack, VIA orchestrator or gateway, closed loop
# or open loop at RATE. Leaves RESULTS/NAME.json (saga_bench's summary),
# NAME.progress, NAME.cpu-start and the CPU line at the end in stack_cpu_end,
# the gateway's peak RSS in stack_gw_rss, the metrics of every service at
# the start and the end of the measured phase (NAME.SERVICE.metrics-start,
# NAME.SERVICE.metrics), the statements count (NAME.statements-count, with
# TALLY_PG_STATEMENTS=1), the costliest statements (NAME.statements.txt) and
# what the databases wrote (NAME.writes-start, NAME.writes: write_counts).
stack_bench() {
  local saga_bench=$1 name=$2 via=$3 offered=${4:-0} subs=${5:-0} hot=${6:-0}
  local target_args=(--port="$stack_orch_port")
  [[ $via == gateway ]] && target_args=(--port="$stack_gw_port" --api-key="$api_key" --subscribers="$subs")
  echo "run $name: via $via, $accounts accounts, $connections connections, ${duration}s$([[ $offered != 0 ]] && echo ", open loop at $offered/s")$([[ $subs != 0 ]] && echo ", $subs subscribers")$([[ $hot != 0 ]] && echo ", hot $hot")" >&2
  local dbs=("${stack_db}_s0" "${stack_db}_s1" "${stack_db}_sagas")
  local metrics_of=("relay:$stack_relay_port" "orchestrator:$stack_orch_port" "gateway:$stack_gw_port"
    "s0:${stack_shard_ports[0]}" "s1:${stack_shard_ports[1]}")
  (
    # Once the measured phase begins: the CPU used and the counters so
    # far, so that the figures leave the setup and warm-up out.
    wait_measuring "$results/$name.progress" || true
    # The statements' reset before write_counts: on databases at scale its
    # sizes can take seconds, which the statements would otherwise miss.
    # (write_counts reads the WAL position first, a moment after the start.)
    record_cpu "$results/$name.cpu-start" "${stack_watched[@]}"
    statements_reset "${dbs[@]}"
    write_counts "$results/$name.writes-start" "${dbs[@]}"
    local m
    for m in "${metrics_of[@]}"; do http_get_to "$results/$name.${m%%:*}.metrics-start" "${m#*:}" /metrics || true; done
  ) &
  local watch_pid=$! bench_rc=0
  "$saga_bench" "${target_args[@]}" --shards="$stack_spec" --token="$token" --accounts="$accounts" --hot="$hot" \
    --connections="$connections" --duration="$duration" --warmup="$warmup" --rate="$offered" \
    >"$results/$name.json" 2> >(tee "$results/$name.progress" >&2) || bench_rc=$?
  wait "$watch_pid" || true
  if ((bench_rc != 0)); then
    echo "run $name: saga_bench failed ($bench_rc)" >&2
    return 1
  fi
  stack_gw_rss=$(peak_rss_kb "$stack_gw_pid")
  stack_cpu_end=$(record_cpu /dev/stdout "${stack_watched[@]}")
  write_counts "$results/$name.writes" "${dbs[@]}"
  statements_report "$results/$name.statements.txt" "${dbs[@]}"
  statements_count "${dbs[@]}" >"$results/$name.statements-count" || true
  local m
  for m in "${metrics_of[@]}"; do curl -s "http://127.0.0.1:${m#*:}/metrics" >"$results/$name.${m%%:*}.metrics" || true; done
}

# stack_stop: stops the services and drops the stack's databases (when
# stack_start made them).
stack_stop() {
  local i
  stop_services
  ((stack_fresh)) || return 0
  for i in s0 s1 sagas; do pg_admin -c "DROP DATABASE ${stack_db}_$i WITH (FORCE)"; done
}
