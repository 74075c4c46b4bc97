-- Settlement's `→ settled` (and dispatch's `claimed → in_flight`) change an attempt's `status`,
-- which the partial index of migration 20261203930000 named in its predicate (`WHERE status =
-- 'in_flight'`): a column an index depends on, so neither update could be HOT and each wrote a
-- new entry into every index of the table (primary key, (action_id, attempt_no),
-- provider_request_id). The same index on `ended_at IS NULL` holds the same attempts for
-- reconciliation's orphan sweep (an attempt leaves `in_flight` only through dispatch's completion,
-- which sets `ended_at` in the same update; the few that reconciliation cuts to `usage_missing`
-- keep a NULL `ended_at` and stay in it), and the sweep's queries ask for both conditions, so they
-- still read only what is unended. A lower fillfactor leaves room on each page for the new
-- version of a row, which a HOT update needs: an attempt row is updated three times in its life.
DROP INDEX "attempt_in_flight_action_id_idx";
CREATE INDEX "attempt_unended_action_id_idx" ON "attempt" ("action_id") WHERE "ended_at" IS NULL;
ALTER TABLE "attempt" SET (fillfactor = 80);
-- What the sweep's use of the index rests on: an attempt in flight has not ended.
ALTER TABLE "attempt" ADD CONSTRAINT "attempt_in_flight_unended" CHECK ("status" <> 'in_flight' OR "ended_at" IS NULL);
