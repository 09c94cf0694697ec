-- An event's payload is written once and read back as text by the relay:
-- json keeps the text as written (smaller than jsonb for these documents,
-- and neither parsed into jsonb on insert nor printed back on read). The
-- outbox is bounded by retention, so the rewrite is short.
ALTER TABLE outbox_event ALTER COLUMN payload TYPE json;
