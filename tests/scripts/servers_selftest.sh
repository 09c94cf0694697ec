#!/usr/bin/env bash
# The server functions take an optional DIR; calling them bare is intended.
# shellcheck disable=SC2119

# Starts a throwaway PostgreSQL and Redis with scripts/lib/servers.sh, checks
# that both answer and that an immediate restart keeps the data, then checks
# that cleanup stops them and removes their directories.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=scripts/lib/servers.sh
source "$root/scripts/lib/servers.sh"

fail() {
  echo "servers_selftest: FAIL: $*" >&2
  exit 1
}

psql_q() { psql -h "$TALLY_PG_HOST" -p "$TALLY_PG_PORT" -U "$TALLY_PG_USER" -d postgres -XAtq -c "$1"; }

tally_cleanup_on_exit
tally_pg_start
tally_redis_start
pg_dir=$TALLY_PG_DATA
redis_dir=$TALLY_REDIS_DIR

[[ $(psql_q 'select 1') == 1 ]] || fail "psql did not answer"
[[ $(psql_q 'show fsync') == on ]] || fail "fsync is not on"
[[ $(psql_q 'show max_connections') == 300 ]] || fail "max_connections is not 300"
[[ $(psql_q 'show listen_addresses') == 127.0.0.1 ]] || fail "listens beyond loopback"
[[ -S $pg_dir/.s.PGSQL.$TALLY_PG_PORT ]] || fail "unix socket not in $pg_dir"

psql_q 'create table t (v int); insert into t values (42)'
tally_pg_restart_immediate
[[ $(psql_q 'select v from t') == 42 ]] || fail "committed row lost in immediate restart"

[[ $(redis-cli -h "$TALLY_REDIS_HOST" -p "$TALLY_REDIS_PORT" ping) == PONG ]] || fail "redis did not answer"
[[ $(redis-cli -h "$TALLY_REDIS_HOST" -p "$TALLY_REDIS_PORT" config get save | tail -n 1) == "" ]] ||
  fail "redis persistence is on"

tally_pg_stop
tally_pg_stop  # a stopped cluster is fine
psql_q 'select 1' 2>/dev/null && fail "pg still answers after stop"

redis_pid=$(cat "$redis_dir/redis.pid")
_tally_cleanup
kill -0 "$redis_pid" 2>/dev/null && fail "redis still running after cleanup"
[[ ! -e $pg_dir && ! -e $redis_dir ]] || fail "temp dirs not removed"

echo "servers_selftest: ok"
