# shellcheck shell=bash
# A Docker engine and docker-compose from Debian's packages, for
# scripts/compose-up and scripts/chaos-compose. Source this file, then:
#
#   tally_docker_ensure     installs docker.io, docker-compose and debootstrap
#                           when missing; starts dockerd when none answers
#                           (--bridge=none --iptables=false: every container
#                           uses the host network), exports DOCKER (the
#                           client matching Debian's engine)
#   tally_docker_stop_ours  stops the dockerd that tally_docker_ensure started
#   tally_base_image        the tag of the offline base image (scripts/docker-base):
#                           tally-base:bookworm-<hash of the packages the
#                           Dockerfile installs>, so a new package makes a new base

_tally_dockerd_pid=""

tally_docker_ensure() {
  local missing=() pkg status
  for pkg in docker.io docker-compose debootstrap; do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    [[ $status == "install ok installed" ]] || missing+=("$pkg")
  done
  if ((${#missing[@]})); then
    echo "docker: installing ${missing[*]}" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null ||
      { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
  fi
  export DOCKER=/usr/bin/docker
  if "$DOCKER" info >/dev/null 2>&1; then
    return 0
  fi
  local log=/tmp/tally-dockerd.log _
  echo "docker: starting dockerd (log $log)" >&2
  dockerd --bridge=none --iptables=false --ip6tables=false >"$log" 2>&1 &
  _tally_dockerd_pid=$!
  for _ in $(seq 120); do
    "$DOCKER" info >/dev/null 2>&1 && return 0
    kill -0 "$_tally_dockerd_pid" 2>/dev/null || break
    sleep 0.5
  done
  echo "docker: dockerd did not start; end of $log:" >&2
  tail -20 "$log" >&2
  return 1
}

tally_docker_stop_ours() {
  [[ -n $_tally_dockerd_pid ]] || return 0
  kill "$_tally_dockerd_pid" 2>/dev/null || true
  wait "$_tally_dockerd_pid" 2>/dev/null || true
  _tally_dockerd_pid=""
}

tally_base_image() {
  local sum
  sum=$(sed -n 's/^RUN ensure-packages //p' Dockerfile | sha256sum | cut -c1-12)
  echo "tally-base:bookworm-$sum"
}
