-- Each attempt records the price revision it is priced at (issue 10): the primary the reservation's,
-- an extra attempt its own route's revision in force (admission puts it in the command's RouteTarget;
-- a fallback on another route is no longer billed at the primary route's price). Settlement,
-- reconciliation's imports and releases read it (AttemptRepository.priceRevisionOf is the one rule:
-- the attempt's own, else, on rows written before this column, the reservation's). Existing rows
-- are back-filled with their reservation's revision, which is what they were priced at.
ALTER TABLE "attempt" ADD COLUMN "price_revision_id" TEXT;
UPDATE "attempt" t SET "price_revision_id" = r."price_revision_id" FROM "reservation" r WHERE r."action_id" = t."action_id";

-- The extra-attempt admission with the attempt's price revision: the serialised function of
-- migration 20261202100100, unchanged, then — in the same autocommit call, only when it admitted —
-- the revision written on the attempt row it has just inserted (a row no other path can hold yet).
CREATE FUNCTION dispatch_admit_extra_attempt_priced(
  p_action text, p_attempt text, p_attempt_no int, p_role text, p_route text, p_route_version int, p_effective int,
  p_hold bigint, p_policy_revision text, p_max_attempts int, p_max_hedges int, p_max_retries int, p_max_extra bigint,
  p_floor bigint, p_min_remaining_ms int, p_claimed_by text, p_now timestamptz, p_extendable text[], p_attempt_status text,
  p_lock_order text[], p_price_revision text
) RETURNS TABLE (refused text, attempts_total int) LANGUAGE plpgsql AS $$
BEGIN
  SELECT d.refused, d.attempts_total INTO refused, attempts_total
  FROM dispatch_admit_extra_attempt(p_action, p_attempt, p_attempt_no, p_role, p_route, p_route_version, p_effective, p_hold,
    p_policy_revision, p_max_attempts, p_max_hedges, p_max_retries, p_max_extra, p_floor, p_min_remaining_ms, p_claimed_by, p_now,
    p_extendable, p_attempt_status, p_lock_order) d;
  IF refused IS NULL THEN
    UPDATE attempt t SET price_revision_id = p_price_revision WHERE t.id = p_attempt;
  END IF;
  RETURN NEXT;
END $$;

-- The winner compare-and-set in the global lock order (docs/architecture.md: attempt → action):
-- the asking attempt's row first, then dispatch_choose_winner (migration 20261202100100, unchanged:
-- the action, then the winning attempt, which this call already holds). Before, it locked the action
-- and then the attempt, against settlement, which locks the attempt and then the action.
CREATE FUNCTION dispatch_choose_winner_in_order(p_action text, p_attempt text, p_now timestamptz, p_open text[])
RETURNS TABLE (won boolean, winner_attempt_id text) LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM attempt t WHERE t.id = p_attempt AND t.action_id = p_action FOR UPDATE;
  RETURN QUERY SELECT w.won, w.winner_attempt_id FROM dispatch_choose_winner(p_action, p_attempt, p_now, p_open) w;
END $$;

-- Route contracts may name the upstream's idempotency header (issue 10): admission puts it in the
-- dispatch command's RouteTarget and dispatch sends the action id in it on the primary and its
-- retries. It changes no spend, so it takes no four-eyes approval; like any contract field, a
-- change makes a new, unverified contract version.
ALTER TABLE "route_contract_version" ADD COLUMN "upstream_idempotency_header" TEXT;
