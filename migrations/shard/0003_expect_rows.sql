-- A batch passes each update the number of rows it must change (the rows
-- it locked); any other count aborts the transaction, so a write can never
-- be silently lost.
CREATE FUNCTION expect_rows(changed bigint, expected bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
  IF changed IS DISTINCT FROM expected THEN
    RAISE EXCEPTION 'a batch update changed % rows where it locked %', changed, expected
      USING ERRCODE = 'P0004';
  END IF;
  RETURN changed;
END
$$;
