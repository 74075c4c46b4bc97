-- action.financial_state repeated reservation.status: settlement (and every other money path,
-- through ReservationHoldRepository.moveMany) updated the action row once more per settled batch,
-- only to copy the reservation's new status onto it (bench:settlement, auto_explain: 50 of the 71
-- ms of a 500-event moveMany, an update of every action plus a scan to find them). The action's
-- money state is its reservation's status: the status API and the tests read it there. The
-- admission functions are redefined only to stop inserting the column (otherwise unchanged from
-- 20261203700000_budget_account_concurrent_create and 20261202150000_experiment_cohorts).

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
    request_fingerprint, status, status_reason, deadline_at, dispatch_deadline_at, created_at, updated_at, request_id,
    quota_scope, workflow_id_hash, experiment_id, cohort)
  VALUES (x->>'id', x->>'workload_id', x->>'environment', x->>'route_id', (x->>'route_version')::int, x->>'model_alias', x->>'api_kind',
    x->>'stream_mode', (x->>'requested_candidates')::int, (x->>'effective_candidates')::int, (x->>'output_ceiling')::int,
    (x->>'input_tokens_estimate')::int, x->>'exception_id', x->>'idempotency_key', x->>'request_fingerprint', 'admitted', 'admitted',
    (x->>'deadline_at')::timestamptz, (x->>'dispatch_deadline_at')::timestamptz, (x->>'now')::timestamptz, (x->>'now')::timestamptz,
    x->>'request_id', x->>'quota_scope', x->>'workflow_id_hash', x->>'experiment_id', x->>'cohort');

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

-- The same decisions for a group whose admissions all lock the same rows (one in-flight counter,
-- at most one token counter, the same budget accounts; no workflow or team/environment token
-- counter) and whose rows all exist: the rows are locked once, in lock order, each admission is
-- decided in order against running totals in memory, then each row is updated once and the
-- admitted actions, reservations and outbox rows are inserted in one statement each. Updating a
-- hot row once per group instead of once per admission keeps its version chain short. Returns
-- NULL when the group does not qualify (the caller then decides one admission at a time).
CREATE OR REPLACE FUNCTION admission_admit_group(items jsonb) RETURNS TABLE (refused text, outbox_id bigint) LANGUAGE plpgsql AS $$
DECLARE
  head jsonb := items->0;
  n int := jsonb_array_length(items);
  item jsonb;
  b jsonb;
  k int;
  j int;
  ok boolean;
  step text;
  hold bigint;
  cur_in_flight int;
  cur_tokens int;
  used bigint[];
  budget_ids text[] := ARRAY(SELECT x->>'id' FROM jsonb_array_elements(head->'budgets') x);
  nb int := jsonb_array_length(head->'budgets');
  last_budget bigint[];
  taken text[];
  steps text[] := array_fill(NULL::text, ARRAY[n]);
  admitted int[] := '{}';
  admitted_tokens int := 0;
  admitted_hold bigint := 0;
  ids bigint[];
  acts jsonb;
  ress jsonb;
  obs jsonb;
  v_used bigint;
BEGIN
  -- qualify: the same rows for every admission
  FOR k IN 0 .. n - 1 LOOP
    item := items->k;
    IF item->'slot'->>'scope' IS DISTINCT FROM head->'slot'->>'scope'
      OR item->'slot'->>'scope_id' IS DISTINCT FROM head->'slot'->>'scope_id'
      OR jsonb_typeof(item->'tok') IS DISTINCT FROM jsonb_typeof(head->'tok')
      OR item->'tok'->>'scope_id' IS DISTINCT FROM head->'tok'->>'scope_id'
      OR item->'tok'->>'window_start' IS DISTINCT FROM head->'tok'->>'window_start'
      OR jsonb_typeof(item->'wf') = 'object'
      OR jsonb_array_length(item->'st') > 0
      OR jsonb_path_query_array(item->'budgets', '$[*].id') IS DISTINCT FROM jsonb_path_query_array(head->'budgets', '$[*].id') THEN
      RETURN;
    END IF;
  END LOOP;

  -- lock the rows in lock order; a missing row sends the group the slow way (which creates it)
  SELECT q.in_flight INTO cur_in_flight FROM quota_counter q
  WHERE q.scope = head->'slot'->>'scope' AND q.scope_id = head->'slot'->>'scope_id' AND q.window_start = 'epoch' AND q.instance_id = ''
  FOR UPDATE;
  IF NOT FOUND THEN RETURN; END IF;
  IF jsonb_typeof(head->'tok') = 'object' THEN
    SELECT q.tokens INTO cur_tokens FROM quota_counter q
    WHERE q.scope = 'workload_tokens_per_minute' AND q.scope_id = head->'tok'->>'scope_id'
      AND q.window_start = (head->'tok'->>'window_start')::timestamptz AND q.instance_id = ''
    FOR UPDATE;
    IF NOT FOUND THEN RETURN; END IF;
  END IF;
  used := '{}';
  FOR k IN 1 .. nb LOOP
    SELECT a.pending_microusd + a.unresolved_microusd + a.settled_microusd INTO v_used FROM budget_account a
    WHERE a.id = budget_ids[k] FOR UPDATE;
    IF NOT FOUND THEN RETURN; END IF;
    used := used || v_used;
  END LOOP;
  last_budget := array_fill(NULL::bigint, ARRAY[nb]);

  -- idempotency keys already taken (a key taken concurrently fails the insert below: slow way)
  taken := ARRAY(SELECT a.idempotency_key FROM action a
    WHERE a.workload_id = head->'action'->>'workload_id'
      AND a.idempotency_key = ANY (ARRAY(SELECT x->'action'->>'idempotency_key' FROM jsonb_array_elements(items) x)));

  -- decide each in order, as admission_admit_one would
  FOR k IN 0 .. n - 1 LOOP
    item := items->k;
    hold := (item->>'hold')::bigint;
    step := NULL;
    IF cur_in_flight + 1 > (item->'slot'->>'max')::int THEN
      step := 'slot';
    ELSIF jsonb_typeof(item->'tok') = 'object' AND cur_tokens + (item->'tok'->>'tokens')::int > (item->'tok'->>'limit')::int THEN
      step := 'tokens';
    ELSE
      FOR j IN 1 .. nb LOOP
        b := item->'budgets'->(j - 1);
        IF hold > (b->>'budget')::bigint OR used[j] + hold > (b->>'budget')::bigint THEN
          step := b->>'step';
          EXIT;
        END IF;
      END LOOP;
    END IF;
    IF step IS NULL AND item->'action'->>'idempotency_key' = ANY (taken) THEN step := 'unique_violation'; END IF;
    IF step IS NULL THEN
      cur_in_flight := cur_in_flight + 1;
      IF jsonb_typeof(item->'tok') = 'object' THEN
        cur_tokens := cur_tokens + (item->'tok'->>'tokens')::int;
        admitted_tokens := admitted_tokens + (item->'tok'->>'tokens')::int;
      END IF;
      FOR j IN 1 .. nb LOOP
        used[j] := used[j] + hold;
        last_budget[j] := (item->'budgets'->(j - 1)->>'budget')::bigint;
      END LOOP;
      admitted_hold := admitted_hold + hold;
      IF item->'action'->>'idempotency_key' IS NOT NULL THEN taken := taken || (item->'action'->>'idempotency_key'); END IF;
      admitted := admitted || k;
    END IF;
    steps[k + 1] := step;
  END LOOP;

  IF cardinality(admitted) > 0 THEN
    UPDATE quota_counter q SET in_flight = q.in_flight + cardinality(admitted), updated_at = now()
    WHERE q.scope = head->'slot'->>'scope' AND q.scope_id = head->'slot'->>'scope_id' AND q.window_start = 'epoch' AND q.instance_id = '';
    IF jsonb_typeof(head->'tok') = 'object' THEN
      UPDATE quota_counter q SET tokens = q.tokens + admitted_tokens, updated_at = now()
      WHERE q.scope = 'workload_tokens_per_minute' AND q.scope_id = head->'tok'->>'scope_id'
        AND q.window_start = (head->'tok'->>'window_start')::timestamptz AND q.instance_id = '';
    END IF;
    FOR j IN 1 .. nb LOOP
      UPDATE budget_account a SET pending_microusd = a.pending_microusd + admitted_hold, budget_microusd = last_budget[j], updated_at = now()
      WHERE a.id = budget_ids[j];
    END LOOP;

    -- the admitted rows as JSON arrays, read once each into typed rows
    SELECT jsonb_agg(e.value->'action' ORDER BY e.o),
           jsonb_agg(e.value->'reservation' || jsonb_build_object('action_id', e.value->'action'->'id', 'hold', e.value->'hold',
             'now', e.value->'action'->'now') ORDER BY e.o),
           jsonb_agg(e.value->'outbox' ORDER BY e.o)
    INTO acts, ress, obs
    FROM jsonb_array_elements(items) WITH ORDINALITY AS e(value, o)
    WHERE (e.o - 1)::int = ANY (admitted);

    INSERT INTO action (id, workload_id, environment, route_id, route_version, model_alias, api_kind, stream_mode,
      requested_candidates, effective_candidates, output_ceiling, input_tokens_estimate, exception_id, idempotency_key,
      request_fingerprint, status, status_reason, deadline_at, dispatch_deadline_at, created_at, updated_at, request_id,
      quota_scope, workflow_id_hash, experiment_id, cohort)
    SELECT t.id, t.workload_id, t.environment, t.route_id, t.route_version, t.model_alias, t.api_kind, t.stream_mode,
      t.requested_candidates, t.effective_candidates, t.output_ceiling, t.input_tokens_estimate, t.exception_id, t.idempotency_key,
      t.request_fingerprint, 'admitted', 'admitted', t.deadline_at, t.dispatch_deadline_at, t."now", t."now", t.request_id,
      t.quota_scope, t.workflow_id_hash, t.experiment_id, t.cohort
    FROM jsonb_to_recordset(acts) AS t(id text, workload_id text, environment text, route_id text, route_version int, model_alias text,
      api_kind text, stream_mode text, requested_candidates int, effective_candidates int, output_ceiling int, input_tokens_estimate int,
      exception_id text, idempotency_key text, request_fingerprint text, deadline_at timestamptz, dispatch_deadline_at timestamptz,
      "now" timestamptz, request_id text, quota_scope text, workflow_id_hash text, experiment_id text, cohort text);

    INSERT INTO reservation (id, action_id, workload_account_id, exception_account_id, scope_account_ids, reserved_output_tokens,
      reserved_microusd, price_revision_id, status, status_reason, created_at, updated_at)
    SELECT t.id, t.action_id, t.workload_account_id, t.exception_account_id, t.scope_account_ids, t.reserved_output_tokens, t.hold,
      t.price_revision_id, 'pending', 'reserved at admission', t."now", t."now"
    FROM jsonb_to_recordset(ress) AS t(id text, action_id text, workload_account_id text, exception_account_id text,
      scope_account_ids text[], reserved_output_tokens int, hold bigint, price_revision_id text, "now" timestamptz);

    WITH ins AS (
      INSERT INTO outbox_message (event_id, topic, key, payload)
      SELECT t.event_id, t.topic, t.key, t.payload
      FROM jsonb_to_recordset(obs) AS t(event_id text, topic text, key text, payload jsonb)
      RETURNING id, event_id
    )
    SELECT array_agg(ins.id ORDER BY u.o) INTO ids
    FROM jsonb_array_elements(obs) WITH ORDINALITY AS u(value, o) JOIN ins ON ins.event_id = u.value->>'event_id';
  END IF;

  j := 0;
  FOR k IN 0 .. n - 1 LOOP
    refused := steps[k + 1];
    outbox_id := NULL;
    IF refused IS NULL THEN
      j := j + 1;
      outbox_id := ids[j];
    END IF;
    RETURN NEXT;
  END LOOP;
END $$;

ALTER TABLE "action" DROP COLUMN "financial_state";
