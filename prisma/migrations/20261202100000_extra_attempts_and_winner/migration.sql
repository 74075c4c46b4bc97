-- Extra attempts of one action (issue 10): hedges, retries and fallbacks, each with its own hold,
-- claim and ledger row, and the action's winner chosen by compare-and-set.
--
-- attempt.hold_microusd: this attempt's own worst case (the primary's: the reservation's amount at
-- admission), which the reservation's pending grew by when it was admitted. It is what the attempt
-- moves to unresolved when it ends without usage evidence (never the whole pool).
-- NULL on attempts recorded before this migration (they were the only attempt of their action).
ALTER TABLE "attempt" ADD COLUMN "hold_microusd" BIGINT;
ALTER TABLE "attempt" ADD COLUMN "hedge_policy_revision_id" TEXT;
ALTER TABLE "attempt" ADD COLUMN "winner" BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE "attempt" ADD COLUMN "deadline_outcome" TEXT;
ALTER TABLE "attempt" ADD CONSTRAINT "attempt_deadline_outcome_check"
    CHECK ("deadline_outcome" IS NULL OR "deadline_outcome" IN ('on_time', 'late', 'cancelled'));
ALTER TABLE "attempt" ADD CONSTRAINT "attempt_hold_microusd_check" CHECK ("hold_microusd" IS NULL OR "hold_microusd" >= 0);

-- The one winner of the action (set once, under the action's row lock).
ALTER TABLE "action" ADD COLUMN "winner_attempt_id" TEXT;

-- What finance reads per ledger row about the attempt tree (NULL on rows settled before it).
ALTER TABLE "ledger_entry" ADD COLUMN "attempt_no" INTEGER;
ALTER TABLE "ledger_entry" ADD COLUMN "winner" BOOLEAN;
ALTER TABLE "ledger_entry" ADD COLUMN "attempts_total" INTEGER;
ALTER TABLE "ledger_entry" ADD COLUMN "hedge_policy_revision_id" TEXT;
ALTER TABLE "ledger_entry" ADD COLUMN "deadline_outcome" TEXT;
