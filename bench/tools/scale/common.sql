-- The model every generated database shares (bench/tools/scale_seed.py):
-- functions of a session (pg_temp), so nothing is left in the schema.
-- Accounts are numbered 0..N-1 ("acc-<i>", tenant "bench"); what happens
-- to an account and when follows from its number and from the slot
-- numbers s = (m - 1) * N + i of the activity rounds m = 1..R, so that the
-- two shards and the saga store, generated apart, agree on every saga.

-- The shard of an account, as common/sharding/routing.cpp routes it with
-- 1024 buckets split evenly over two shards: bucket = the first 8 bytes of
-- SHA-256(tenant 0x1f account) mod 1024, shard 1 from bucket 512 on, i.e.
-- bit 1 of the digest's seventh byte.
CREATE FUNCTION pg_temp.shard_of(i bigint) RETURNS int LANGUAGE sql IMMUTABLE AS $$
  SELECT (get_byte(sha256(convert_to('bench' || chr(31) || 'acc-' || i, 'UTF8')), 6) >> 1) & 1
$$;

-- One field of a request hash's canonical form (common/validate/fields.cpp).
CREATE FUNCTION pg_temp.canon(t text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT octet_length(t) || ':' || t || ';'
$$;

CREATE FUNCTION pg_temp.sha(t text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT encode(sha256(convert_to(t, 'UTF8')), 'hex')
$$;

-- Whether account i has a feature that pct accounts in a hundred have.
CREATE FUNCTION pg_temp.flag(i bigint, salt bigint, pct int) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT abs(hashint8(i + salt * 1000000000000)) % 100 < pct
$$;

-- What slot s does: T transfer (60 %), D deduct (20 %), H held deduct,
-- confirmed (10 %), F transfer refused for insufficient funds (3 %), R
-- deduct refunded in part (7 %).
-- (A lookup in a string of a hundred letters keeps the function one
-- expression, which the planner inlines.)
CREATE FUNCTION pg_temp.kind(s bigint) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT substr('TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTDDDDDDDDDDDDDDDDDDDDHHHHHHHHHHFFFRRRRRRR', (abs(hashint8(s)) % 100)::int + 1, 1)
$$;

-- A transfer of round m goes from account i to (i + offset) mod N.
CREATE FUNCTION pg_temp.offset_of(m bigint, n bigint) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT 1 + (m * 7919 + 104729) % (n - 1)
$$;

-- Unix ms of position pos (pos = (m * N + i) * 16 + phase) on the day
-- [t0, t0 + span) spread over `total` positions.
CREATE FUNCTION pg_temp.ms(pos bigint, t0 bigint, span bigint, total bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
  SELECT t0 + pos * span / total
$$;

CREATE FUNCTION pg_temp.ts(ms bigint) RETURNS timestamptz LANGUAGE sql IMMUTABLE AS $$
  SELECT 'epoch'::timestamptz + ms * interval '1 millisecond'
$$;

-- RFC 3339 with milliseconds, as the orchestrator writes expiries in commands.
CREATE FUNCTION pg_temp.rfc3339(ms bigint) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT to_char(pg_temp.ts(ms) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

-- A saga id (common/contract/saga_id.cpp): "sg_", 48 bits of unix ms and 80
-- bits that are random there and here 15 bits of a hash of r and the 65
-- bits of r (unique: the saga's kind and number), in Crockford base32.
CREATE FUNCTION pg_temp.saga_id(ms bigint, r bigint) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT 'sg_'
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((ms >> 45) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((ms >> 40) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((ms >> 35) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((ms >> 30) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((ms >> 25) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((ms >> 20) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((ms >> 15) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((ms >> 10) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((ms >> 5) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((ms >> 0) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((hashint8(r) >> 10) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((hashint8(r) >> 5) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((hashint8(r) >> 0) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((r >> 60) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((r >> 55) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((r >> 50) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((r >> 45) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((r >> 40) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((r >> 35) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((r >> 30) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((r >> 25) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((r >> 20) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((r >> 15) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((r >> 10) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((r >> 5) & 31)::int + 1, 1)
    || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((r >> 0) & 31)::int + 1, 1)
$$;
