-- An outbox payload is stored as the text it is published as (`json`), not parsed into `jsonb`.
-- Nothing queries inside a payload on a hot path: the relay publishes the writer's own text and
-- the sweep reads a row whole; `->>` still works for whoever investigates a quarantined row.
-- `jsonb` cost settlement's batch insert a parse of every payload into a tree and a larger row
-- (~1.8 KB against ~1.5 KB of text for a settled event); with `json` the text is only checked.
-- The SQL functions that insert jsonb values (admission_admit, dispatch_complete_group) keep
-- working: jsonb → json is an assignment cast.
ALTER TABLE "outbox_message" ALTER COLUMN "payload" TYPE json USING "payload"::json;
