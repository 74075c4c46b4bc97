-- Outbox rows that can never be published (too large for the broker, a payload that fails its
-- topic's schema) are quarantined with a reason instead of being reloaded by every sweep
-- (issue 8, item 8). A quarantined row keeps published_at NULL, so pruning never deletes it.
ALTER TABLE "outbox_message" ADD COLUMN "quarantined_at" TIMESTAMPTZ(3);
ALTER TABLE "outbox_message" ADD COLUMN "quarantine_reason" TEXT;
