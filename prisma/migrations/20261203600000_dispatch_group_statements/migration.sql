-- Issue 12: dispatch's claim and completion statements, for a GROUP of attempts at a time.
--
-- Until now each attempt's claim and each attempt's completion was one autocommit statement
-- (the CTEs `dispatch_claim` and `dispatch_complete` in libs/db's dispatch repository): a round
-- trip and a commit (a WAL flush) each, two per answer. Every completion also released the
-- workload's in-flight slot on the one `quota_counter` row that every admission of the workload
-- increments, so completions queued on that row's lock behind each other and behind admissions
-- (`Lock:transactionid` on the completion in the bench's saturation phase). The repository now
-- groups the claims (and, apart, the completions) that arrive while one of its statements runs,
-- or in the same event-loop turn, and sends them as one call of the functions below: one round
-- trip and one commit for the group. Each item is decided exactly as the single statement
-- decided it, in the order given; a group of one is the old statement.
--
-- The completion releases the group's in-flight slots at the end, one UPDATE per workload in
-- workload-id order, so a group holds each counter row for its commit only and two groups (two
-- dispatch instances) take counter rows in the same order. Row locks per item are as before:
-- the attempt, then its action (docs/architecture.md, lock order).

-- items: [{ action_id, now, attempt_no, claimed_by, claimable[], attempt_id, role, route_id,
--   route_version, attempt_status, effective_candidates, dispatch_to, dispatch_from[],
--   hold_microusd (text|null), policy_revision_id, experiment_pause_id }]
-- One row per item, in order: the action's status (null: no such action), whether its dispatch
-- deadline had passed, and 1 when this call took the claim (0 otherwise).
CREATE FUNCTION dispatch_claim_group(items jsonb)
RETURNS TABLE (ord int, status text, expired boolean, claimed int)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  it jsonb;
  i int;
  v_now timestamptz;
  v_status text;
  v_expired boolean;
  v_claimed int;
BEGIN
  FOR it, i IN SELECT e.value, e.ordinality::int FROM jsonb_array_elements(items) WITH ORDINALITY AS e LOOP
    v_now := (it->>'now')::timestamptz;
    v_claimed := 0;
    SELECT a.status, a.dispatch_deadline_at <= v_now INTO v_status, v_expired
      FROM action a WHERE a.id = it->>'action_id' FOR UPDATE;
    IF NOT FOUND THEN
      v_status := NULL;
      v_expired := NULL;
    ELSIF NOT v_expired AND v_status = ANY (ARRAY(SELECT jsonb_array_elements_text(it->'claimable'))) THEN
      INSERT INTO dispatch_claim (action_id, attempt_no, claimed_by, claimed_at)
        VALUES (it->>'action_id', (it->>'attempt_no')::int, it->>'claimed_by', v_now)
        ON CONFLICT DO NOTHING;
      GET DIAGNOSTICS v_claimed = ROW_COUNT;
      IF v_claimed > 0 THEN
        INSERT INTO attempt (id, action_id, attempt_no, role, route_id, route_version, status, status_reason, effective_candidates,
          hold_microusd, hedge_policy_revision_id, price_revision_id, experiment_pause_id, started_at, updated_at)
        SELECT it->>'attempt_id', it->>'action_id', (it->>'attempt_no')::int, it->>'role', it->>'route_id', (it->>'route_version')::int,
          it->>'attempt_status', 'sent upstream', (it->>'effective_candidates')::int,
          COALESCE((it->>'hold_microusd')::bigint, (SELECT r.reserved_microusd FROM reservation r WHERE r.action_id = it->>'action_id')),
          it->>'policy_revision_id',
          (SELECT r.price_revision_id FROM reservation r WHERE r.action_id = it->>'action_id'),
          it->>'experiment_pause_id', v_now, v_now;
        UPDATE action SET status = it->>'dispatch_to', status_reason = 'dispatched', updated_at = v_now
          WHERE id = it->>'action_id' AND action.status = ANY (ARRAY(SELECT jsonb_array_elements_text(it->'dispatch_from')));
      END IF;
    END IF;
    ord := i;
    status := v_status;
    expired := v_expired;
    claimed := v_claimed;
    RETURN NEXT;
  END LOOP;
END
$$;

-- items: [{ attempt_id, attempt_from[], attempt_to, status_reason, provider_request_id, http_status,
--   returned_candidates, candidate_outcomes (json), prompt_block_reason, input_tokens,
--   cached_input_tokens, output_tokens_total, reasoning_tokens, usage_source, delivery_outcome,
--   acceptance_verdict, acceptance_reason, now, action_id, finishing, action_from[], action_to,
--   action_reason, action_returned_candidates, workload_id, event_id, topic, key, payload (json),
--   cache_write_input_tokens, audio_input_tokens, audio_output_tokens, image_output_tokens,
--   service_tier, feature_calls (json|null), deadline_outcome, winner }]
-- One row per item, in order: whether it was recorded now (ok), whether a previous run had already
-- recorded it (its event's outbox row exists), the attempt's status before, and the outbox row id.
CREATE FUNCTION dispatch_complete_group(items jsonb)
RETURNS TABLE (ord int, ok boolean, recorded boolean, attempt_status text, outbox_id bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  it jsonb;
  i int;
  v_now timestamptz;
  v_found boolean;
  v_status text;
  v_action_status text;
  v_finishing boolean;
  v_ok boolean;
  v_recorded boolean;
  v_outbox bigint;
  v_ended int;
  released jsonb := '{}'::jsonb;
  w record;
BEGIN
  FOR it, i IN SELECT e.value, e.ordinality::int FROM jsonb_array_elements(items) WITH ORDINALITY AS e LOOP
    v_now := (it->>'now')::timestamptz;
    v_finishing := (it->>'finishing')::boolean;
    v_outbox := NULL;
    v_action_status := NULL;
    SELECT a.status INTO v_status FROM attempt a WHERE a.id = it->>'attempt_id' FOR UPDATE;
    v_found := FOUND;
    IF NOT v_found THEN
      v_status := NULL;
    END IF;
    IF v_finishing AND v_found THEN
      SELECT ac.status INTO v_action_status FROM action ac WHERE ac.id = it->>'action_id' FOR UPDATE;
    END IF;
    v_recorded := EXISTS (SELECT 1 FROM outbox_message m WHERE m.event_id = it->>'event_id');
    v_ok := COALESCE(
      v_status = ANY (ARRAY(SELECT jsonb_array_elements_text(it->'attempt_from')))
        AND (NOT v_finishing OR v_action_status = ANY (ARRAY(SELECT jsonb_array_elements_text(it->'action_from'))))
        AND NOT v_recorded,
      false);
    IF v_ok THEN
      UPDATE attempt SET status = it->>'attempt_to', status_reason = it->>'status_reason',
        provider_request_id = it->>'provider_request_id', http_status = (it->>'http_status')::int,
        returned_candidates = (it->>'returned_candidates')::int, candidate_outcomes = it->'candidate_outcomes',
        prompt_block_reason = it->>'prompt_block_reason', input_tokens = (it->>'input_tokens')::int,
        cached_input_tokens = (it->>'cached_input_tokens')::int, output_tokens_total = (it->>'output_tokens_total')::int,
        reasoning_tokens = (it->>'reasoning_tokens')::int, usage_source = it->>'usage_source',
        delivery_outcome = it->>'delivery_outcome', acceptance_verdict = it->>'acceptance_verdict',
        acceptance_reason = it->>'acceptance_reason', cache_write_input_tokens = (it->>'cache_write_input_tokens')::int,
        audio_input_tokens = (it->>'audio_input_tokens')::int, audio_output_tokens = (it->>'audio_output_tokens')::int,
        image_output_tokens = (it->>'image_output_tokens')::int, service_tier = it->>'service_tier',
        feature_calls = CASE WHEN jsonb_typeof(it->'feature_calls') = 'null' THEN NULL ELSE it->'feature_calls' END,
        deadline_outcome = it->>'deadline_outcome', ended_at = v_now, updated_at = v_now
      WHERE id = it->>'attempt_id';
      IF v_finishing THEN
        UPDATE action SET status = it->>'action_to', status_reason = it->>'action_reason',
          returned_candidates = (it->>'action_returned_candidates')::int, delivery_outcome = it->>'delivery_outcome',
          acceptance_verdict = it->>'acceptance_verdict', acceptance_reason = it->>'acceptance_reason', updated_at = v_now,
          winner_attempt_id = CASE WHEN (it->>'winner')::boolean THEN COALESCE(winner_attempt_id, it->>'attempt_id') ELSE winner_attempt_id END
        WHERE id = it->>'action_id';
        GET DIAGNOSTICS v_ended = ROW_COUNT;
        IF v_ended > 0 THEN
          released := jsonb_set(released, ARRAY[it->>'workload_id'], to_jsonb(COALESCE((released->>(it->>'workload_id'))::int, 0) + 1));
        END IF;
      END IF;
      INSERT INTO outbox_message (event_id, topic, key, payload)
        VALUES (it->>'event_id', it->>'topic', it->>'key', it->'payload')
        RETURNING id INTO v_outbox;
    END IF;
    ord := i;
    ok := v_ok;
    recorded := v_recorded;
    attempt_status := v_status;
    outbox_id := v_outbox;
    RETURN NEXT;
  END LOOP;
  -- The in-flight slots of the actions that ended, one UPDATE per workload, in workload-id order.
  FOR w IN SELECT key AS workload_id, value::int AS n FROM jsonb_each_text(released) ORDER BY key LOOP
    UPDATE quota_counter SET in_flight = GREATEST(in_flight - w.n, 0), updated_at = now()
      WHERE scope = 'workload' AND scope_id = w.workload_id AND window_start = 'epoch'::timestamptz;
  END LOOP;
END
$$;
