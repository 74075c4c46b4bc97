-- Billable detail on the ledger (issue 14): the token counts of the categories a structured price
-- revision bills apart (subsets of input_tokens / output_tokens_total), their cost lines, the
-- per-call fees, the context tier the usage crossed and the service tier whose rates priced it.
-- Per-call fee lines are JSONB [{feature, calls, microusd}] with money as decimal strings, exactly as
-- gateway.usage.settled.v1 carries them. Null on operator releases and on rows settled before this.
ALTER TABLE "ledger_entry" ADD COLUMN "cache_write_input_tokens" INTEGER;
ALTER TABLE "ledger_entry" ADD COLUMN "audio_input_tokens" INTEGER;
ALTER TABLE "ledger_entry" ADD COLUMN "audio_output_tokens" INTEGER;
ALTER TABLE "ledger_entry" ADD COLUMN "image_output_tokens" INTEGER;
ALTER TABLE "ledger_entry" ADD COLUMN "cache_write_microusd" BIGINT;
ALTER TABLE "ledger_entry" ADD COLUMN "audio_input_microusd" BIGINT;
ALTER TABLE "ledger_entry" ADD COLUMN "audio_output_microusd" BIGINT;
ALTER TABLE "ledger_entry" ADD COLUMN "image_output_microusd" BIGINT;
ALTER TABLE "ledger_entry" ADD COLUMN "fees_microusd" BIGINT;
ALTER TABLE "ledger_entry" ADD COLUMN "fee_lines" JSONB;
ALTER TABLE "ledger_entry" ADD COLUMN "context_tier_above_input_tokens" INTEGER;
ALTER TABLE "ledger_entry" ADD COLUMN "service_tier" TEXT;
