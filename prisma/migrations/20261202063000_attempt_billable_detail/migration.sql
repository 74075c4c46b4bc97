-- The billable detail a provider reports beyond the token totals (issue 14), kept on the attempt
-- beside the counts it refines: cache writes and audio (subsets of input_tokens), audio and image
-- output (subsets of output_tokens_total), the service tier billed and the per-call-billed features
-- ({"web_search": 2}). Null on attempts written before, and on attempts without usage.
ALTER TABLE "attempt"
  ADD COLUMN "cache_write_input_tokens" INTEGER,
  ADD COLUMN "audio_input_tokens" INTEGER,
  ADD COLUMN "audio_output_tokens" INTEGER,
  ADD COLUMN "image_output_tokens" INTEGER,
  ADD COLUMN "service_tier" TEXT,
  ADD COLUMN "feature_calls" JSONB;
