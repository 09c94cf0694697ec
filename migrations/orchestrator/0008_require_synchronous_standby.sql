-- On a replicated cluster (docs/ha.md) a write may be acknowledged only
-- once a synchronous standby holds it. The services configured for one
-- (database.require_synchronous_standby) call this in every transaction
-- that writes value or a saga's progress: it refuses the transaction, so
-- nothing commits, while the server would commit without waiting for a
-- standby — no synchronous standby named (a promoted standby whose own
-- standby has not caught up yet) or a session whose synchronous_commit does
-- not wait for the standby's disk — unless an operator chose the degraded
-- mode on this server (tally.accept_unreplicated_writes = on).
CREATE FUNCTION require_synchronous_standby() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF (current_setting('synchronous_standby_names') = ''
      OR current_setting('synchronous_commit') NOT IN ('on', 'remote_apply'))
     AND coalesce(current_setting('tally.accept_unreplicated_writes', true), '') <> 'on' THEN
    RAISE EXCEPTION 'no synchronous standby: the write is refused until one is back'
      USING ERRCODE = 'TL001';
  END IF;
END
$$;
