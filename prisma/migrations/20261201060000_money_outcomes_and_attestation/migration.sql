-- Delivery, acceptance and money are separate outcomes (issue 6, defect 4): what the user got
-- (delivery_outcome), whether it was a valid answer (acceptance_verdict + reason) and where the
-- money stands (financial_state) are recorded apart, on the action and on each attempt.
-- request_id: the id the settled event carries, the same whichever service settles.
ALTER TABLE "action" ADD COLUMN "request_id" TEXT;
ALTER TABLE "action" ADD COLUMN "delivery_outcome" TEXT;
ALTER TABLE "action" ADD COLUMN "acceptance_verdict" TEXT;
ALTER TABLE "action" ADD COLUMN "acceptance_reason" TEXT;
ALTER TABLE "action" ADD COLUMN "financial_state" TEXT;

ALTER TABLE "attempt" ADD COLUMN "delivery_outcome" TEXT;
ALTER TABLE "attempt" ADD COLUMN "acceptance_verdict" TEXT;
ALTER TABLE "attempt" ADD COLUMN "acceptance_reason" TEXT;
ALTER TABLE "attempt" ADD COLUMN "financial_state" TEXT;

-- Operator release books the attested amount (defect 3): who attested, why, and the case. Its
-- usage is unknown, so token counts and the per-category split may be null (never zero).
ALTER TABLE "ledger_entry" ADD COLUMN "request_id" TEXT;
ALTER TABLE "ledger_entry" ADD COLUMN "case_id" TEXT;
ALTER TABLE "ledger_entry" ADD COLUMN "attested_by" TEXT;
ALTER TABLE "ledger_entry" ADD COLUMN "attestation_reason" TEXT;
ALTER TABLE "ledger_entry" ALTER COLUMN "input_tokens" DROP NOT NULL;
ALTER TABLE "ledger_entry" ALTER COLUMN "cached_input_tokens" DROP NOT NULL;
ALTER TABLE "ledger_entry" ALTER COLUMN "output_tokens_total" DROP NOT NULL;
ALTER TABLE "ledger_entry" ALTER COLUMN "reasoning_tokens" DROP NOT NULL;
ALTER TABLE "ledger_entry" ALTER COLUMN "total_tokens" DROP NOT NULL;
ALTER TABLE "ledger_entry" ALTER COLUMN "input_microusd" DROP NOT NULL;
ALTER TABLE "ledger_entry" ALTER COLUMN "cached_input_microusd" DROP NOT NULL;
ALTER TABLE "ledger_entry" ALTER COLUMN "output_microusd" DROP NOT NULL;
ALTER TABLE "ledger_entry" ALTER COLUMN "reasoning_microusd" DROP NOT NULL;

-- Keyset paging of GET /ledger on (settled_at, id).
CREATE INDEX "ledger_entry_settled_at_id_idx" ON "ledger_entry"("settled_at", "id");
