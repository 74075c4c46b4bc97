-- Structured price revisions (issue 14): optional base rates per billing category, the context
-- tier rule, and context tiers / service tiers / per-call fees as JSONB. Money inside the JSON is
-- decimal strings (never JSON numbers), so bigint micro-USD round-trips exactly. Null: absent.
ALTER TABLE "price_revision" ADD COLUMN "cache_write_per_mtok_microusd" BIGINT;
ALTER TABLE "price_revision" ADD COLUMN "audio_input_per_mtok_microusd" BIGINT;
ALTER TABLE "price_revision" ADD COLUMN "audio_output_per_mtok_microusd" BIGINT;
ALTER TABLE "price_revision" ADD COLUMN "image_output_per_mtok_microusd" BIGINT;
ALTER TABLE "price_revision" ADD COLUMN "context_tier_rule" TEXT;
ALTER TABLE "price_revision" ADD COLUMN "context_tiers" JSONB;
ALTER TABLE "price_revision" ADD COLUMN "service_tiers" JSONB;
ALTER TABLE "price_revision" ADD COLUMN "per_call_fees" JSONB;
