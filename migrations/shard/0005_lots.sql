-- Grant lots. Every credit grants a lot: its amount, its expiry (or none)
-- and rule version, frozen at grant time. Debits take value from lots in
-- consumption order (earliest expiry first, non-expiring last, then lot
-- id); sum(remaining) over an account's lots is its balance and
-- sum(held) its held amount.
CREATE TABLE lot (
  tenant text COLLATE "C" NOT NULL,
  account_id text COLLATE "C" NOT NULL,
  lot_id bigint NOT NULL CHECK (lot_id >= 1),  -- 1, 2, ... per account: grant order
  granted bigint NOT NULL CHECK (granted >= 0),
  remaining bigint NOT NULL CHECK (remaining >= 0 AND remaining <= granted),
  held bigint NOT NULL CHECK (held >= 0 AND held <= remaining),
  expired bigint NOT NULL DEFAULT 0 CHECK (expired >= 0),
  expires_at timestamptz,
  rule_version text NOT NULL,
  origin text NOT NULL CHECK (origin IN ('grant', 'transfer', 'refund', 'migration')),
  grace_ms bigint,  -- a refund's lot: the refund.expired_lot_grace it was given
  source_type text COLLATE "C" NOT NULL,  -- the operation that granted it
  source_id text COLLATE "C" NOT NULL,
  state text NOT NULL CHECK (state IN ('open', 'exhausted', 'expired')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, account_id, lot_id)
);
-- A batch reads every open lot of its accounts; the expiry job reads the
-- open lots that are due. Neither index covers remaining or held, so a
-- debit's update of a lot that stays open can be a HOT update.
CREATE INDEX lot_open ON lot (tenant, account_id) WHERE state = 'open';
CREATE INDEX lot_due ON lot (expires_at) WHERE state = 'open' AND expires_at IS NOT NULL;

ALTER TABLE account ADD COLUMN lot_count bigint NOT NULL DEFAULT 0 CHECK (lot_count >= 0);
-- The lots an operation granted to (credit, refund), took from (debit,
-- capture, expire) or held in (hold), in consumption order:
-- [[lot_id, amount, expires_at unix ms or null, rule_version], ...].
ALTER TABLE operation ADD COLUMN lots jsonb;

-- Value from before lots: one non-expiring lot per account that holds
-- some, recorded by an operation of its own (no ledger entry: the balance
-- does not move), and every open hold held in it.
INSERT INTO lot (tenant, account_id, lot_id, granted, remaining, held, rule_version, origin, source_type, source_id,
                 state)
SELECT tenant, account_id, 1, balance, balance, held, '1', 'migration', 'lot_migration', '1', 'open'
FROM account WHERE balance > 0;
UPDATE account SET lot_count = 1 WHERE balance > 0;
INSERT INTO operation (tenant, account_id, biz_type, biz_id, request_hash, state, amount, balance_after, held_after,
                       version_after, lots)
SELECT tenant, account_id, 'lot_migration', '1', 'migration', 'succeeded', balance, balance, held, version,
       jsonb_build_array(jsonb_build_array(1, balance, NULL, '1'))
FROM account WHERE balance > 0;
UPDATE operation o SET lots = jsonb_build_array(jsonb_build_array(1, h.amount, NULL, '1'))
FROM hold h
WHERE h.state = 'held' AND o.tenant = h.tenant AND o.account_id = h.account_id AND o.biz_type = 'hold'
  AND o.biz_id = h.hold_id;
