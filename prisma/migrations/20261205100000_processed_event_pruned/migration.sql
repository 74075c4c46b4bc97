-- processed_event grew for ever: one row per event any consumer handled. Rows older than the
-- redelivery horizon (the longest topic retention + Kafka's 7-day segment roll + a day:
-- REDELIVERY_HORIZON_MS in libs/contracts) guard against nothing and are pruned by
-- reconciliation (PruneProcessedEvents, hourly, in chunks). The rows are appended in time order,
-- so a BRIN index finds the old ones in a few pages, at almost no cost per insert (a btree on
-- processed_at would add an index entry to every consumed event's transaction).
CREATE INDEX "processed_event_processed_at_brin" ON "processed_event" USING brin ("processed_at");
