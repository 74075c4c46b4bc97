-- Exceptions rest on evidence and a projection (issue 16 item 5): the outcome a request should
-- improve, its expected volume and typical input; the projected cost at request time and again at
-- approval (with the price revision used); the approver's override reason when the projection
-- exceeds the budget, also on the approve event of the audit trail. Nullable: requests filed
-- before this carry no evidence (approving one needs an override reason).
ALTER TABLE "candidate_exception" ADD COLUMN "outcome_metric" TEXT;
ALTER TABLE "candidate_exception" ADD COLUMN "outcome_baseline" DOUBLE PRECISION;
ALTER TABLE "candidate_exception" ADD COLUMN "outcome_target" DOUBLE PRECISION;
ALTER TABLE "candidate_exception" ADD COLUMN "expected_requests" INTEGER;
ALTER TABLE "candidate_exception" ADD COLUMN "typical_input_tokens" INTEGER;
ALTER TABLE "candidate_exception" ADD COLUMN "request_projection_microusd" BIGINT;
ALTER TABLE "candidate_exception" ADD COLUMN "request_projection_route_id" TEXT;
ALTER TABLE "candidate_exception" ADD COLUMN "request_projection_price_revision_id" TEXT;
ALTER TABLE "candidate_exception" ADD COLUMN "approval_projection_microusd" BIGINT;
ALTER TABLE "candidate_exception" ADD COLUMN "approval_projection_route_id" TEXT;
ALTER TABLE "candidate_exception" ADD COLUMN "approval_projection_price_revision_id" TEXT;
ALTER TABLE "candidate_exception" ADD COLUMN "approval_projected_at" TIMESTAMPTZ(3);
ALTER TABLE "candidate_exception" ADD COLUMN "override_reason" TEXT;
ALTER TABLE "candidate_exception_event" ADD COLUMN "override_reason" TEXT;
