import type { Clock } from '@gateway/service-kit';
import { AddPriceRevision } from '../usecases/add-price-revision/add-price-revision.usecase';
import { PendingChange } from '../usecases/change-requests';
import { DecideChangeRequest } from '../usecases/decide-change-request/decide-change-request.usecase';
import { PutWorkload } from '../usecases/put-workload/put-workload.usecase';
import { PutHedgePolicy } from '../usecases/put-hedge-policy/put-hedge-policy.usecase';
import { PutScopeLimit } from '../usecases/put-scope-limit/put-scope-limit.usecase';
import { PutWorkloadCommand } from '../usecases/put-workload/put-workload.command';
import { UpdateRouteContract } from '../usecases/update-route-contract/update-route-contract.usecase';
import { ALLOWLIST, bob, olga } from './fixtures';
import { StartExperiment } from '../usecases/start-experiment/start-experiment.usecase';
import {
  InMemoryChangeRequestStore,
  InMemoryExperimentStore,
  InMemoryHedgePolicyStore,
  InMemoryPolicyStore,
  SequentialIds,
} from './in-memory-policy.store';

/** The policy writes that may need a second operator, and the approval step, over one set of fakes. */
export function fourEyes(store: InMemoryPolicyStore, clock: Clock) {
  const changes = new InMemoryChangeRequestStore();
  const putWorkload = new PutWorkload(store, changes, clock, new SequentialIds('cr-wl'));
  const addPrice = new AddPriceRevision(store, changes, clock, new SequentialIds('price'));
  const updateContract = new UpdateRouteContract(store, clock, ALLOWLIST, changes, new SequentialIds('cr-rt'));
  const putScopeLimit = new PutScopeLimit(store, changes, clock, new SequentialIds('cr-sl'));
  const hedging = new InMemoryHedgePolicyStore();
  const putHedgePolicy = new PutHedgePolicy(hedging, store, changes, clock, new SequentialIds('hp'));
  const experiments = new InMemoryExperimentStore(hedging);
  const startExperiment = new StartExperiment(experiments, hedging, store, changes, clock, new SequentialIds('exp'));
  const decide = new DecideChangeRequest(
    changes,
    putWorkload,
    addPrice,
    updateContract,
    putScopeLimit,
    putHedgePolicy,
    startExperiment,
    clock,
  );
  /** olga asks, bob approves when approval is needed. */
  const approved = async <T>(result: T | PendingChange): Promise<T | null> => {
    if (!(result instanceof PendingChange)) return result;
    await decide.execute(bob, result.body.id, { decision: 'approve' });
    return null;
  };
  return {
    changes,
    putWorkload,
    addPrice,
    updateContract,
    putScopeLimit,
    hedging,
    putHedgePolicy,
    experiments,
    startExperiment,
    decide,
    approved,
    seedWorkload: async (id: string, cmd: PutWorkloadCommand) => approved(await putWorkload.execute(olga, id, cmd)),
  };
}
