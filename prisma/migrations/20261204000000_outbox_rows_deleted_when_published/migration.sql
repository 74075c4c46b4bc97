-- The outbox is a queue, not a record: a row is deleted in the statement that used to mark it
-- published (the topic keeps the event for 7–30 days, longer than the 72 h the rows were kept).
-- Marking rewrote each row (~1.4 KB for a settled event, three index entries, its WAL) and left
-- the old version's `published_at IS NULL` index entry behind until a vacuum; a table holding 72 h
-- of rows is vacuumed rarely, so the sweep's "anything due?" check, every second in every service,
-- visited every row marked since the last vacuum (45 ms at 45,000 rows in bench:settlement).
-- What stays is what is waiting: rows not yet sent, and quarantined rows an operator must fix.
DELETE FROM "outbox_message" WHERE "published_at" IS NOT NULL;
DROP INDEX "outbox_message_published_at_id_idx";
ALTER TABLE "outbox_message" DROP COLUMN "published_at";
-- The sweep asks for the oldest unquarantined rows past the writer's lease.
CREATE INDEX "outbox_message_created_at_idx" ON "outbox_message" ("created_at") WHERE "quarantined_at" IS NULL;
-- Vacuumed after a fixed number of deleted rows, not a share of a table that stays small.
ALTER TABLE "outbox_message" SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);
