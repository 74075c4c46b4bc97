-- Reconciliation's orphan sweep (ReconciliationRepository.actionsWithInFlightAttemptsPastDeadline,
-- every 5–30 s) asked for the attempts still `in_flight` with no index on their status: a
-- sequential scan of the whole attempt table each time (3 ms at a bench's 10^4–10^5 rows; it grows
-- with every attempt ever made). This index holds only the attempts in flight, so the sweep reads
-- what is in flight. Its price: `status` becomes a column an index depends on, so an attempt's
-- status change is never a HOT update (its completion already was not: `provider_request_id` is
-- indexed; settlement's `→ settled` could be, when its page had room).
CREATE INDEX "attempt_in_flight_action_id_idx" ON "attempt" ("action_id") WHERE "status" = 'in_flight';
