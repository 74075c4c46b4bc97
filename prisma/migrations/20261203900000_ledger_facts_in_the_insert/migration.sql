-- The experiment facts (migrations 20261203300000, 20261203500000) are copied by the one insert into
-- ledger_entry itself (libs/db ledger.repository.ts, EXPERIMENT_FACTS), set-based: the batch's rows
-- joined once to their actions and, for experiment actions, their attempts. The row trigger ran a
-- plpgsql function and an action lookup per row, ~10 µs of the ~60 µs a settled row cost Postgres
-- (docs/decisions.md, "Batched settlement"). The rule is unchanged: the action's cohort; for an
-- experiment action also the experiment, its admission time and acceptance verdict, whether the
-- attempt won when the writer did not say (action.winner_attempt_id) and the attempt's end,
-- candidate outcomes and experiment pause; NULLs otherwise.
DROP TRIGGER "ledger_entry_experiment_facts" ON "ledger_entry";
DROP FUNCTION ledger_experiment_facts();
