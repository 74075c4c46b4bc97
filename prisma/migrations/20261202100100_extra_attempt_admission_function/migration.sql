-- The serialised extra-attempt admission and the winner compare-and-set (issue 10), each one
-- autocommit call (DispatchRepository.admitExtraAttempt / chooseWinner). Both take the action row
-- lock first, so a hedge admission and a winner are decided one after the other. Lock order
-- (docs/architecture.md): action, then reservation, then the reservation's budget accounts by scope
-- rank (p_lock_order = BUDGET_ACCOUNT_LOCK_ORDER: workload, exception, team, environment), then id —
-- the order admission and the hold movements take them.

-- Checks, in order: the attempt is not claimed yet; no winner; the action is dispatched and its
-- reservation unresolved or pending (else action_terminal); deadline; the role's own limit (hedge,
-- retry); attempts so far < max; every non-primary attempt's exposure (its ledger cost once settled,
-- else its hold) + this hold <= max extra spend; then for every budget account of the reservation:
-- pending + unresolved + settled + hold <= budget (budget_exhausted) and budget - that sum >= floor
-- (spend_floor). Only then: reservation.reserved and every account's pending grow by the hold, and
-- the claim and the attempt row are inserted. A refusal writes nothing. Returns the refusal (or
-- NULL) and the action's attempt count after the call.
CREATE FUNCTION dispatch_admit_extra_attempt(
  p_action text, p_attempt text, p_attempt_no int, p_role text, p_route text, p_route_version int, p_effective int,
  p_hold bigint, p_policy_revision text, p_max_attempts int, p_max_hedges int, p_max_retries int, p_max_extra bigint,
  p_floor bigint, p_min_remaining_ms int, p_claimed_by text, p_now timestamptz, p_extendable text[], p_attempt_status text,
  p_lock_order text[]
) RETURNS TABLE (refused text, attempts_total int) LANGUAGE plpgsql AS $$
DECLARE
  act record;
  res record;
  acc record;
  n_hedges int;
  n_retries int;
  n_all int;
  extra bigint;
  account_ids text[];
BEGIN
  attempts_total := NULL;
  SELECT a.id, a.status, a.winner_attempt_id, a.deadline_at INTO act FROM action a WHERE a.id = p_action FOR UPDATE;
  IF NOT FOUND THEN
    refused := 'action_terminal'; RETURN NEXT; RETURN;
  END IF;
  IF EXISTS (SELECT 1 FROM dispatch_claim c WHERE c.action_id = p_action AND c.attempt_no = p_attempt_no)
     OR EXISTS (SELECT 1 FROM attempt t WHERE t.id = p_attempt) THEN
    refused := 'already_claimed'; RETURN NEXT; RETURN;
  END IF;
  IF act.winner_attempt_id IS NOT NULL THEN
    refused := 'winner_chosen'; RETURN NEXT; RETURN;
  END IF;
  IF NOT (act.status = ANY (p_extendable)) THEN
    refused := 'action_terminal'; RETURN NEXT; RETURN;
  END IF;
  SELECT r.id, r.status, r.workload_account_id, r.exception_account_id, r.scope_account_ids INTO res
  FROM reservation r WHERE r.action_id = p_action FOR UPDATE;
  IF NOT FOUND OR res.status NOT IN ('pending', 'unresolved') THEN
    refused := 'action_terminal'; RETURN NEXT; RETURN;
  END IF;
  IF act.deadline_at - p_now < make_interval(secs => p_min_remaining_ms / 1000.0) THEN
    refused := 'deadline_too_short'; RETURN NEXT; RETURN;
  END IF;

  SELECT count(*) FILTER (WHERE t.role = 'hedge'), count(*) FILTER (WHERE t.role = 'retry'), count(*),
         COALESCE(sum(COALESCE(l.cost_microusd, t.hold_microusd, 0)) FILTER (WHERE t.role <> 'primary'), 0)
  INTO n_hedges, n_retries, n_all, extra
  FROM attempt t LEFT JOIN ledger_entry l ON l.attempt_id = t.id
  WHERE t.action_id = p_action;
  IF p_role = 'hedge' AND n_hedges >= p_max_hedges THEN
    refused := 'hedge_limit'; RETURN NEXT; RETURN;
  END IF;
  IF p_role = 'retry' AND n_retries >= p_max_retries THEN
    refused := 'retry_limit'; RETURN NEXT; RETURN;
  END IF;
  IF n_all >= p_max_attempts THEN
    refused := 'attempt_allowance_spent'; RETURN NEXT; RETURN;
  END IF;
  IF extra + p_hold > p_max_extra THEN
    refused := 'spend_allowance_spent'; RETURN NEXT; RETURN;
  END IF;

  account_ids := ARRAY[res.workload_account_id]
    || CASE WHEN res.exception_account_id IS NULL THEN '{}'::text[] ELSE ARRAY[res.exception_account_id] END
    || COALESCE(res.scope_account_ids, '{}'::text[]);
  FOR acc IN
    SELECT b.id, b.budget_microusd, b.pending_microusd + b.unresolved_microusd + b.settled_microusd AS used
    FROM budget_account b WHERE b.id = ANY (account_ids)
    ORDER BY array_position(p_lock_order, b.scope), b.id
    FOR UPDATE
  LOOP
    IF acc.used + p_hold > acc.budget_microusd THEN
      refused := 'budget_exhausted'; RETURN NEXT; RETURN;
    END IF;
    IF acc.budget_microusd - acc.used - p_hold < p_floor THEN
      refused := 'spend_floor'; RETURN NEXT; RETURN;
    END IF;
  END LOOP;

  UPDATE reservation r SET reserved_microusd = r.reserved_microusd + p_hold, updated_at = p_now WHERE r.id = res.id;
  UPDATE budget_account b SET pending_microusd = b.pending_microusd + p_hold, updated_at = now() WHERE b.id = ANY (account_ids);
  INSERT INTO dispatch_claim (action_id, attempt_no, claimed_by, claimed_at) VALUES (p_action, p_attempt_no, p_claimed_by, p_now);
  INSERT INTO attempt (id, action_id, attempt_no, role, route_id, route_version, status, status_reason, effective_candidates,
    hold_microusd, hedge_policy_revision_id, started_at, updated_at)
  VALUES (p_attempt, p_action, p_attempt_no, p_role, p_route, p_route_version, p_attempt_status, 'sent upstream (' || p_role || ')',
    p_effective, p_hold, p_policy_revision, p_now, p_now);
  refused := NULL;
  attempts_total := n_all + 1;
  RETURN NEXT;
END $$;

-- The winner compare-and-set: under the action's row lock, the first attempt of this action to ask
-- while the action is still open (p_open) becomes its winner (action.winner_attempt_id and
-- attempt.winner); asking again as the winner answers won. Returns whether p_attempt is the winner,
-- and the winner's id (NULL when there is none: an unknown attempt, or an action already closed).
CREATE FUNCTION dispatch_choose_winner(p_action text, p_attempt text, p_now timestamptz, p_open text[])
RETURNS TABLE (won boolean, winner_attempt_id text) LANGUAGE plpgsql AS $$
DECLARE
  act record;
BEGIN
  SELECT a.status, a.winner_attempt_id AS winner INTO act FROM action a WHERE a.id = p_action FOR UPDATE;
  IF NOT FOUND THEN
    won := false; winner_attempt_id := NULL; RETURN NEXT; RETURN;
  END IF;
  IF act.winner IS NULL AND act.status = ANY (p_open)
     AND EXISTS (SELECT 1 FROM attempt t WHERE t.id = p_attempt AND t.action_id = p_action) THEN
    UPDATE action a SET winner_attempt_id = p_attempt, updated_at = p_now WHERE a.id = p_action;
    UPDATE attempt t SET winner = true, updated_at = p_now WHERE t.id = p_attempt;
    act.winner := p_attempt;
  END IF;
  won := act.winner IS NOT DISTINCT FROM p_attempt AND act.winner IS NOT NULL;
  winner_attempt_id := act.winner;
  RETURN NEXT;
END $$;
