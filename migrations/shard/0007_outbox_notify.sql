-- Wakes the relay: every statement that inserts outbox events notifies
-- channel tally_outbox (no payload). A notification is delivered at
-- commit, and only then, and PostgreSQL sends one per transaction however
-- many statements notified, so a group-committed batch costs one. The
-- trigger is per statement, not per row: a batch of events costs one call.
-- A statement that inserted no row notifies too (a spurious wake costs the
-- relay one empty read). The relay still reads on a slow timer, so a lost
-- notification delays delivery but loses nothing.
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('tally_outbox', '');
  RETURN NULL;
END
$$;
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox_event FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
