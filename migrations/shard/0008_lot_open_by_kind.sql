-- A batch reads an account's open lots in two parts (store/batch.cpp,
-- sql_read_open_lots): every expiring one, and the non-expiring ones in
-- lot id order only as far as its debits and holds need. An account that
-- receives many credits keeps many non-expiring lots open while the older
-- ones are consumed first, so reading them all made every debit cost
-- O(open lots). One partial index per part; the expiring one also serves
-- the account's next expiry (common/projection/next_expiry.hpp). Neither
-- covers remaining or held, so a debit's update of a lot that stays open
-- can still be a HOT update.
DROP INDEX lot_open;
CREATE INDEX lot_open_expiring ON lot (tenant, account_id, expires_at) WHERE state = 'open' AND expires_at IS NOT NULL;
CREATE INDEX lot_open_lasting ON lot (tenant, account_id, lot_id) WHERE state = 'open' AND expires_at IS NULL;
