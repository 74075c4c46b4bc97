-- Settlement updates a reservation once per settled attempt (its settled, unresolved and released
-- buckets and its status). At the default fillfactor (100) a page has no room for the new version,
-- so most of those updates could not be HOT: each wrote a new heap tuple on another page, a
-- row-lock record for the old one and an entry in both of the table's indexes (primary key,
-- action_id). With a fifth of each page free, as the attempt table has had since migration
-- 20261204200000, bench:settlement (thirteenth box, two interleaved pairs) measured 61 % of the
-- reservation updates HOT instead of 30–34 %, 4 % fewer index entries and 3–4 % less WAL per
-- settled event; CPU per event moved less than the box's spread. It costs a quarter more pages for
-- the table. Existing pages stay full until they are rewritten.
ALTER TABLE "reservation" SET (fillfactor = 80);
