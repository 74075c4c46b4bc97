-- Evidence that came after the orphan sweep (docs/decisions.md, "Evidence that comes after the
-- orphan sweep"): dispatch held the provider's usage for an attempt the sweep had already cut, and
-- offers it to the attempt's open `orphaned_attempt` case; reconciliation's sweep settles the case
-- from it through the import path (one ledger row, the case resolved, the hold moved). The column
-- is nullable without a default: adding it rewrites nothing. The partial index holds only the open
-- cases with evidence waiting, so the sweep's probe reads none of the others.
ALTER TABLE "reconciliation_case" ADD COLUMN "late_evidence" JSONB;
CREATE INDEX "reconciliation_case_late_evidence_idx" ON "reconciliation_case" ("opened_at")
  WHERE status = 'open' AND late_evidence IS NOT NULL;
