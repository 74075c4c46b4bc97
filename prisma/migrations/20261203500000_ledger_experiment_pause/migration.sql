-- The pause an attempt ran under (issue 11), on its ledger row and so on usage.settled, so a finance
-- consumer counts the actions dispatched while hedging was paused from the topic alone, as the
-- report does from attempt.experiment_pause_id. Copied by the same trigger as the other experiment
-- facts (migration 20261203300000, restated here with the one added column: migrations are immutable).
ALTER TABLE "ledger_entry" ADD COLUMN "experiment_pause_id" TEXT;

CREATE OR REPLACE FUNCTION ledger_experiment_facts() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  x_cohort text;
  x_experiment text;
  x_admitted timestamptz;
  x_verdict text;
  x_winner text;
BEGIN
  SELECT a.cohort, a.experiment_id, a.created_at, a.acceptance_verdict, a.winner_attempt_id
    INTO x_cohort, x_experiment, x_admitted, x_verdict, x_winner
    FROM action a WHERE a.id = NEW.action_id;
  IF NEW.cohort IS NULL THEN
    NEW.cohort := x_cohort;
  END IF;
  IF x_experiment IS NOT NULL THEN
    NEW.experiment_id := x_experiment;
    NEW.action_admitted_at := x_admitted;
    NEW.acceptance_verdict := x_verdict;
    IF NEW.winner IS NULL THEN
      NEW.winner := x_winner IS NOT DISTINCT FROM NEW.attempt_id;
    END IF;
    SELECT t.ended_at, t.candidate_outcomes, t.experiment_pause_id
      INTO NEW.attempt_ended_at, NEW.candidate_outcomes, NEW.experiment_pause_id
      FROM attempt t WHERE t.id = NEW.attempt_id;
  END IF;
  RETURN NEW;
END $$;
