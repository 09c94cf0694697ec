-- The timeline of the server from which each relay consumer last read
-- (docs/relay.md, "After a failover"). A consumer that finds its source on
-- another timeline may have delivered events the new primary never got:
-- its sink forgets this source's objects and rebuilds them. NULL: saved
-- before timelines were kept, taken as the current one.
ALTER TABLE relay_cursor ADD COLUMN timeline integer;
