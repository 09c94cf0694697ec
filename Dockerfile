# Images of Tally for compose.yaml: the services (one image, four programs),
# PostgreSQL and Redis. The services' programs are built on the host by
# scripts/compose-up (Debian 12, like the image) and staged in
# build/docker/bin; the build context holds only that, the migrations and
# the entry scripts (.dockerignore).
#
# BASE_IMAGE: a public Debian 12 image by default. Where no registry is
# reachable, scripts/docker-base makes one from Debian's archive
# (debootstrap + docker import) that already holds every package below, so
# these builds need no network at all.
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE} AS runtime
COPY scripts/container/ensure-packages /usr/local/sbin/
RUN ensure-packages libpq5 libhiredis0.14 libssl3 libprometheus-cpp-core1.0 libjemalloc2 ca-certificates curl

FROM runtime AS service
COPY build/docker/bin/ /usr/local/bin/
COPY migrations/ /usr/share/tally/migrations/
ENV TALLY_SHARD_MIGRATIONS_DIR=/usr/share/tally/migrations/shard \
    TALLY_ORCH_MIGRATIONS_DIR=/usr/share/tally/migrations/orchestrator
USER nobody
# The command names the program: account_shard, orchestrator, relay or gateway.

# One image for a single server (postgres-entry) and for compose.yaml's ha
# profile: pg_auto_failover's monitor and data nodes (pg-auto-failover-entry).
FROM runtime AS postgres
RUN ensure-packages postgresql-15 postgresql-15-auto-failover pg-auto-failover-cli
COPY scripts/container/postgres-entry scripts/container/pg-auto-failover-entry /usr/local/bin/
USER postgres
ENV PGDATA=/var/lib/postgresql/tally PGPORT=5432 PG_LISTEN=127.0.0.1
ENTRYPOINT ["/usr/local/bin/postgres-entry"]

FROM runtime AS redis
RUN ensure-packages redis-server
USER redis
ENV REDIS_PORT=6379 REDIS_BIND=127.0.0.1
# No persistence: a restarted Redis comes back empty, and the relay rebuilds
# the projections from the ledgers.
CMD exec redis-server --bind "$REDIS_BIND" --port "$REDIS_PORT" --save "" --appendonly no
