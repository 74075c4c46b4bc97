-- A budget account created by two admissions at once (the first admissions of a period on a team
-- or environment account shared by several workloads, or of one workload from two instances).
--
-- admission_admit_one upserted the account with `ON CONFLICT (scope, scope_id, period_start) DO
-- UPDATE`, but budget_account has a second unique key, its primary key `id` (the same account,
-- named by budget_account_id). Two concurrent inserts of a new account both passed the arbiter's
-- pre-check; the second then met the first's row in the primary key, which is not an arbiter, and
-- raised a unique violation, which admission_admit reports as `unique_violation`, and the client
-- got 409 idempotency_conflict for a request with no idempotency key (seen once in a fresh-clone CI
-- run: apps/admission/test/quota-scopes.int-spec.ts, 30 admissions on a new team account). Now the
-- account is created empty with `ON CONFLICT DO NOTHING` (no conflict target: every unique index
-- is an arbiter) and the hold is a conditional UPDATE, which waits for a concurrent creator and
-- re-checks the fit on the row as it committed. The fit check covers a new account too (the
-- caller refused a hold above the budget before, so nothing admitted changes). The rest of the
-- function is as in migration 20261202150000_experiment_cohorts.

CREATE OR REPLACE FUNCTION admission_admit_one(a jsonb) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  hold bigint := (a->>'hold')::bigint;
  x jsonb;
  i int;
  n int;
  outbox_id bigint;
BEGIN
  -- in-flight slot
  x := a->'slot';
  IF (x->>'max')::int < 1 THEN PERFORM admission_refuse('slot'); END IF;
  INSERT INTO quota_counter AS q (scope, scope_id, window_start, instance_id, tokens, in_flight, updated_at)
  VALUES (x->>'scope', x->>'scope_id', 'epoch', '', 0, 1, now())
  ON CONFLICT (scope, scope_id, window_start, instance_id) DO UPDATE SET in_flight = q.in_flight + 1, updated_at = now()
    WHERE q.in_flight < (x->>'max')::int;
  GET DIAGNOSTICS n = ROW_COUNT;
  IF n = 0 THEN PERFORM admission_refuse('slot'); END IF;

  -- workload tokens per minute
  x := a->'tok';
  IF jsonb_typeof(x) = 'object' THEN
    IF (x->>'tokens')::int > (x->>'limit')::int THEN PERFORM admission_refuse('tokens'); END IF;
    INSERT INTO quota_counter AS q (scope, scope_id, window_start, instance_id, tokens, in_flight, updated_at)
    VALUES ('workload_tokens_per_minute', x->>'scope_id', (x->>'window_start')::timestamptz, '', (x->>'tokens')::int, 0, now())
    ON CONFLICT (scope, scope_id, window_start, instance_id) DO UPDATE SET tokens = q.tokens + EXCLUDED.tokens, updated_at = now()
      WHERE q.tokens + EXCLUDED.tokens <= (x->>'limit')::int;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n = 0 THEN PERFORM admission_refuse('tokens'); END IF;
  END IF;

  -- workflow calls (fan-out)
  x := a->'wf';
  IF jsonb_typeof(x) = 'object' THEN
    IF (x->>'limit')::int < 1 THEN PERFORM admission_refuse('workflow'); END IF;
    INSERT INTO quota_counter AS q (scope, scope_id, window_start, instance_id, calls, updated_at)
    VALUES (x->>'scope', x->>'scope_id', (x->>'window_start')::timestamptz, '', 1, now())
    ON CONFLICT (scope, scope_id, window_start, instance_id) DO UPDATE SET calls = q.calls + 1, updated_at = now()
      WHERE q.calls + 1 <= (x->>'limit')::int;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n = 0 THEN PERFORM admission_refuse('workflow'); END IF;
  END IF;

  -- team and environment tokens per minute, in that order
  i := 0;
  FOR x IN SELECT value FROM jsonb_array_elements(a->'st') WITH ORDINALITY ORDER BY ordinality LOOP
    IF (x->>'tokens')::int > (x->>'limit')::int THEN PERFORM admission_refuse('scope_tokens:' || i); END IF;
    INSERT INTO quota_counter AS q (scope, scope_id, window_start, instance_id, tokens, in_flight, updated_at)
    VALUES (x->>'scope', x->>'scope_id', (x->>'window_start')::timestamptz, x->>'instance_id', (x->>'tokens')::int, 0, now())
    ON CONFLICT (scope, scope_id, window_start, instance_id) DO UPDATE SET tokens = q.tokens + EXCLUDED.tokens, updated_at = now()
      WHERE q.tokens + EXCLUDED.tokens <= (x->>'limit')::int;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n = 0 THEN PERFORM admission_refuse('scope_tokens:' || i); END IF;
    i := i + 1;
  END LOOP;

  -- budget accounts: workload, exception, team, environment (each entry names its refusal step)
  FOR x IN SELECT value FROM jsonb_array_elements(a->'budgets') WITH ORDINALITY ORDER BY ordinality LOOP
    IF hold > (x->>'budget')::bigint THEN PERFORM admission_refuse(x->>'step'); END IF;
    -- The account exists after this, whoever created it: without a conflict target every unique
    -- index is an arbiter (an upsert on one of the table's two unique keys raised a unique
    -- violation on the other when two admissions created the account at once).
    INSERT INTO budget_account (id, scope, scope_id, period_start, budget_microusd, pending_microusd, updated_at)
    VALUES (x->>'id', x->>'scope', x->>'scope_id', (x->>'period_start')::timestamptz, (x->>'budget')::bigint, 0, now())
    ON CONFLICT DO NOTHING;
    UPDATE budget_account b
      SET pending_microusd = b.pending_microusd + hold, budget_microusd = (x->>'budget')::bigint, updated_at = now()
      WHERE b.scope = x->>'scope' AND b.scope_id = x->>'scope_id' AND b.period_start = (x->>'period_start')::timestamptz
        AND b.pending_microusd + b.unresolved_microusd + b.settled_microusd + hold <= (x->>'budget')::bigint;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n = 0 THEN PERFORM admission_refuse(x->>'step'); END IF;
  END LOOP;

  x := a->'action';
  INSERT INTO action (id, workload_id, environment, route_id, route_version, model_alias, api_kind, stream_mode,
    requested_candidates, effective_candidates, output_ceiling, input_tokens_estimate, exception_id, idempotency_key,
    request_fingerprint, status, status_reason, deadline_at, dispatch_deadline_at, created_at, updated_at, request_id, financial_state,
    quota_scope, workflow_id_hash, experiment_id, cohort)
  VALUES (x->>'id', x->>'workload_id', x->>'environment', x->>'route_id', (x->>'route_version')::int, x->>'model_alias', x->>'api_kind',
    x->>'stream_mode', (x->>'requested_candidates')::int, (x->>'effective_candidates')::int, (x->>'output_ceiling')::int,
    (x->>'input_tokens_estimate')::int, x->>'exception_id', x->>'idempotency_key', x->>'request_fingerprint', 'admitted', 'admitted',
    (x->>'deadline_at')::timestamptz, (x->>'dispatch_deadline_at')::timestamptz, (x->>'now')::timestamptz, (x->>'now')::timestamptz,
    x->>'request_id', 'pending', x->>'quota_scope', x->>'workflow_id_hash', x->>'experiment_id', x->>'cohort');

  x := a->'reservation';
  INSERT INTO reservation (id, action_id, workload_account_id, exception_account_id, scope_account_ids, reserved_output_tokens,
    reserved_microusd, price_revision_id, status, status_reason, created_at, updated_at)
  VALUES (x->>'id', a->'action'->>'id', x->>'workload_account_id', x->>'exception_account_id',
    ARRAY(SELECT jsonb_array_elements_text(x->'scope_account_ids')), (x->>'reserved_output_tokens')::int, hold,
    x->>'price_revision_id', 'pending', 'reserved at admission', (a->'action'->>'now')::timestamptz, (a->'action'->>'now')::timestamptz);

  x := a->'outbox';
  INSERT INTO outbox_message (event_id, topic, key, payload)
  VALUES (x->>'event_id', x->>'topic', x->>'key', x->'payload')
  RETURNING id INTO outbox_id;
  RETURN outbox_id;
END $$;
