-- The experiment's facts on every ledger row of an experiment action (issue 11: "per attempt in the
-- ledger and settled event … so finance can rebuild the report from the topic alone"). The report
-- (libs/domain experimentReport) needs, per action, when it was admitted, when its winner's answer
-- ended, the winner's acceptance verdict and candidates, its attempts and their cost. The attempt
-- tree (attempt_no, winner, attempts_total, hedge policy revision, deadline outcome) and the cohort
-- are on the row already; this adds the rest, as facts (times and verdicts, not "on time": that is
-- judged against the experiment's useful deadline by the report, its one home).
--
-- Copied in one place, like the cohort: the ledger_entry trigger now copies, besides the cohort,
-- the action's experiment, admission time and acceptance verdict (as it stands when the row is
-- written: the winner's row is written after the winner ended the action, so it carries the final
-- verdict) and the attempt's own end and candidate outcomes, whichever writer inserts the row
-- (settlement, the sweeper, an operator release, a usage import); a writer that does not know
-- whether the attempt won gets it from action.winner_attempt_id, the one compare-and-set that
-- decides it. Only for actions in an experiment: other rows keep NULLs and cost no second lookup.
-- Settlement's insert returns them for the usage.settled event.
ALTER TABLE "ledger_entry" ADD COLUMN "experiment_id" TEXT,
  ADD COLUMN "action_admitted_at" TIMESTAMPTZ(3),
  ADD COLUMN "attempt_ended_at" TIMESTAMPTZ(3),
  ADD COLUMN "acceptance_verdict" TEXT,
  ADD COLUMN "candidate_outcomes" JSONB;

CREATE FUNCTION ledger_experiment_facts() RETURNS trigger LANGUAGE plpgsql AS $$
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
    SELECT t.ended_at, t.candidate_outcomes INTO NEW.attempt_ended_at, NEW.candidate_outcomes
      FROM attempt t WHERE t.id = NEW.attempt_id;
  END IF;
  RETURN NEW;
END $$;

DROP TRIGGER "ledger_entry_cohort" ON "ledger_entry";
CREATE TRIGGER "ledger_entry_experiment_facts" BEFORE INSERT ON "ledger_entry" FOR EACH ROW EXECUTE FUNCTION ledger_experiment_facts();
