-- Admission's reservation as one autocommit statement (issue 12): `admission_admit(items)` decides
-- a list of admissions in order, each in a subtransaction, so a refusal undoes that admission's
-- earlier writes and nothing else, and N admissions cost one round trip and one commit. Lock order
-- (docs/architecture.md): in-flight counter, token counter, workflow counter, team and environment
-- token counters, then the workload, exception, team and environment budget accounts. The caller
-- groups only admissions that lock the same counters and accounts of one workload.

-- Raised when a step refuses; the message names the step (slot, tokens, workflow, scope_tokens:<i>,
-- workload_budget, exception_budget, scope_budget:<i>), which the repository maps to its result code.
CREATE FUNCTION admission_refuse(step text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'GW001', MESSAGE = step;
END $$;

-- One admission (the JSON the repository builds); returns the outbox row id, or raises GW001.
CREATE FUNCTION admission_admit_one(a jsonb) RETURNS bigint LANGUAGE plpgsql AS $$
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
    INSERT INTO budget_account AS b (id, scope, scope_id, period_start, budget_microusd, pending_microusd, updated_at)
    VALUES (x->>'id', x->>'scope', x->>'scope_id', (x->>'period_start')::timestamptz, (x->>'budget')::bigint, hold, now())
    ON CONFLICT (scope, scope_id, period_start) DO UPDATE
      SET pending_microusd = b.pending_microusd + EXCLUDED.pending_microusd, budget_microusd = EXCLUDED.budget_microusd, updated_at = now()
      WHERE b.pending_microusd + b.unresolved_microusd + b.settled_microusd + EXCLUDED.pending_microusd <= EXCLUDED.budget_microusd;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n = 0 THEN PERFORM admission_refuse(x->>'step'); END IF;
  END LOOP;

  x := a->'action';
  INSERT INTO action (id, workload_id, environment, route_id, route_version, model_alias, api_kind, stream_mode,
    requested_candidates, effective_candidates, output_ceiling, input_tokens_estimate, exception_id, idempotency_key,
    request_fingerprint, status, status_reason, deadline_at, dispatch_deadline_at, created_at, updated_at, request_id, financial_state,
    quota_scope, workflow_id_hash)
  VALUES (x->>'id', x->>'workload_id', x->>'environment', x->>'route_id', (x->>'route_version')::int, x->>'model_alias', x->>'api_kind',
    x->>'stream_mode', (x->>'requested_candidates')::int, (x->>'effective_candidates')::int, (x->>'output_ceiling')::int,
    (x->>'input_tokens_estimate')::int, x->>'exception_id', x->>'idempotency_key', x->>'request_fingerprint', 'admitted', 'admitted',
    (x->>'deadline_at')::timestamptz, (x->>'dispatch_deadline_at')::timestamptz, (x->>'now')::timestamptz, (x->>'now')::timestamptz,
    x->>'request_id', 'pending', x->>'quota_scope', x->>'workflow_id_hash');

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

-- Decides `items` (a JSON array) in order: each admission commits with the others unless it refused
-- (`refused` names the step) or hit a unique violation (`refused` = 'unique_violation'); either
-- undoes only that admission's writes.
CREATE FUNCTION admission_admit(items jsonb) RETURNS TABLE (refused text, outbox_id bigint) LANGUAGE plpgsql AS $$
DECLARE
  item jsonb;
BEGIN
  FOR item IN SELECT value FROM jsonb_array_elements(items) WITH ORDINALITY ORDER BY ordinality LOOP
    BEGIN
      outbox_id := admission_admit_one(item);
      refused := NULL;
    EXCEPTION
      WHEN SQLSTATE 'GW001' THEN
        refused := SQLERRM;
        outbox_id := NULL;
      WHEN unique_violation THEN
        refused := 'unique_violation';
        outbox_id := NULL;
    END;
    RETURN NEXT;
  END LOOP;
END $$;
