-- The gateway's own spend (route verification probes) is reserved and settled like any other,
-- against the budget of this workload (libs/domain OPERATIONS_WORKLOAD_ID). It starts with no
-- budget: probes are refused (budget_exhausted) until an operator funds it through a budget
-- change (four-eyes). It has no aliases and no keys, so no application can call through it.
INSERT INTO "workload" ("id", "team", "environment", "default_max_candidates", "per_candidate_output_ceiling",
  "budget_microusd", "budget_period", "allowed_aliases", "fallback_chain", "allow_length", "allow_content_filter",
  "deadline_ms", "max_in_flight", "tokens_per_minute", "allow_provider_storage", "created_at", "updated_at",
  "updated_by", "change_reason")
VALUES ('gateway-operations', 'gateway', 'operations', 1, 16, 0, 'month', '{}', '{}', true, true,
  15000, 4, NULL, false, now(), now(), 'migration', 'operations budget for route verification probes')
ON CONFLICT ("id") DO NOTHING;
