-- A new experiment allowance account created by two extra attempts at once (hedges or retries of
-- different actions, the first of a period under one allowance).
--
-- dispatch_admit_extra_attempt_funded upserted the account with `ON CONFLICT (scope, scope_id,
-- period_start) DO UPDATE`, but budget_account has a second unique key, its primary key `id` (the
-- same account, named by budget_account_id), which is not an arbiter: two concurrent creators both
-- passed the arbiter's pre-check and the second failed on the first's row in the primary key with
-- a unique violation, an error out of the extra-attempt admission (60 fresh allowances raised by
-- two hedges at once: 2 of 3 runs failed; apps/dispatch/test/extra-attempt-admission.int-spec.ts).
-- The same race admission had (migration 20261203700000), fixed the same way: the account is
-- created with `ON CONFLICT DO NOTHING` (every unique index an arbiter), then its budget set to the
-- revision in force by an UPDATE, which waits for a concurrent creator and takes the row lock the
-- upsert took before (the allowance account is still locked first of the set). The rest of the
-- function is as in migration 20261202200000_experiment_allowance_funding.

CREATE OR REPLACE FUNCTION dispatch_admit_extra_attempt_funded(
  p_action text, p_attempt text, p_attempt_no int, p_role text, p_route text, p_route_version int, p_effective int,
  p_hold bigint, p_policy_revision text, p_max_attempts int, p_max_hedges int, p_max_retries int, p_max_extra bigint,
  p_floor bigint, p_min_remaining_ms int, p_claimed_by text, p_now timestamptz, p_extendable text[], p_attempt_status text,
  p_lock_order text[], p_price_revision text,
  p_allowance_account text, p_allowance_scope_id text, p_allowance_period_start timestamptz, p_allowance_budget bigint
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
  allowance_id text;
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

  IF p_allowance_account IS NULL THEN
    -- the reservation's own accounts: workload, exception, team, environment
    account_ids := ARRAY[res.workload_account_id]
      || CASE WHEN res.exception_account_id IS NULL THEN '{}'::text[] ELSE ARRAY[res.exception_account_id] END
      || COALESCE(res.scope_account_ids, '{}'::text[]);
  ELSE
    -- the allowance account of this period (its budget: the revision in force), locked first of the set
    INSERT INTO budget_account (id, scope, scope_id, period_start, budget_microusd, pending_microusd, updated_at)
    VALUES (p_allowance_account, 'experiment_allowance', p_allowance_scope_id, p_allowance_period_start, p_allowance_budget, 0, now())
    ON CONFLICT DO NOTHING;
    UPDATE budget_account b SET budget_microusd = p_allowance_budget, updated_at = now()
    WHERE b.scope = 'experiment_allowance' AND b.scope_id = p_allowance_scope_id AND b.period_start = p_allowance_period_start
    RETURNING b.id INTO allowance_id;
    account_ids := ARRAY[allowance_id] || COALESCE(res.scope_account_ids, '{}'::text[]);
  END IF;
  FOR acc IN
    SELECT b.id, b.scope, b.budget_microusd, b.pending_microusd + b.unresolved_microusd + b.settled_microusd AS used
    FROM budget_account b WHERE b.id = ANY (account_ids)
    ORDER BY array_position(p_lock_order, b.scope), b.id
    FOR UPDATE
  LOOP
    IF acc.used + p_hold > acc.budget_microusd THEN
      refused := CASE WHEN acc.id = allowance_id THEN 'experiment_allowance_spent' ELSE 'budget_exhausted' END; RETURN NEXT; RETURN;
    END IF;
    IF acc.budget_microusd - acc.used - p_hold < p_floor THEN
      refused := 'spend_floor'; RETURN NEXT; RETURN;
    END IF;
  END LOOP;

  UPDATE reservation r SET reserved_microusd = r.reserved_microusd + p_hold, updated_at = p_now WHERE r.id = res.id;
  UPDATE budget_account b SET pending_microusd = b.pending_microusd + p_hold, updated_at = now() WHERE b.id = ANY (account_ids);
  IF allowance_id IS NOT NULL THEN
    INSERT INTO reservation_funding AS f (reservation_id, account_id, account_ids, pending_microusd)
    VALUES (res.id, allowance_id, account_ids, p_hold)
    ON CONFLICT (reservation_id, account_id) DO UPDATE SET pending_microusd = f.pending_microusd + EXCLUDED.pending_microusd;
  END IF;
  INSERT INTO dispatch_claim (action_id, attempt_no, claimed_by, claimed_at) VALUES (p_action, p_attempt_no, p_claimed_by, p_now);
  INSERT INTO attempt (id, action_id, attempt_no, role, route_id, route_version, status, status_reason, effective_candidates,
    hold_microusd, hedge_policy_revision_id, price_revision_id, funding_account_ids, started_at, updated_at)
  VALUES (p_attempt, p_action, p_attempt_no, p_role, p_route, p_route_version, p_attempt_status, 'sent upstream (' || p_role || ')',
    p_effective, p_hold, p_policy_revision, p_price_revision, CASE WHEN allowance_id IS NULL THEN NULL ELSE account_ids END, p_now, p_now);
  refused := NULL;
  attempts_total := n_all + 1;
  RETURN NEXT;
END $$;
