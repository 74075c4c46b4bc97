-- A settlement batch announces its ledger rows with one outbox row, not one per row (issue 12).
-- kind 'message': the payload is the message (as before). kind 'ledger_settled': the payload is
-- [[attempt_id, event_id], ...], the rows this transaction inserted into ledger_entry, and its
-- usage.settled messages are built from those rows when a sweep publishes it; the relay of the
-- writer publishes the events it built in memory. The ledger row is the settled event's record,
-- so the event is never written twice; a settled batch of 1,000 writes one ~80 KB row instead of
-- 1,000 rows of ~1 KB with three index entries each (bench/README.md, "An eleventh box").
ALTER TABLE "outbox_message" ADD COLUMN "kind" TEXT NOT NULL DEFAULT 'message';
ALTER TABLE "outbox_message" ADD CONSTRAINT "outbox_message_kind_check" CHECK ("kind" IN ('message', 'ledger_settled'));
