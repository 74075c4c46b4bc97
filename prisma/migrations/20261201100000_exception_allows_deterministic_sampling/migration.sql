-- An exception may allow several candidates without sampling (temperature 0 / top-k 1): near-identical
-- answers, each billed, are refused with candidate_count_without_sampling unless it does (issue 16 §3).
ALTER TABLE "candidate_exception" ADD COLUMN "allows_deterministic_sampling" BOOLEAN NOT NULL DEFAULT false;
