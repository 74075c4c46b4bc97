import type { AdmitInput, AdmitResult, RouteContractVersionView, VoidOutcome } from '@gateway/db';
import { dispatchCommandV1, DispatchReplyV1 } from '@gateway/contracts';
import { OPERATIONS_WORKLOAD_ID } from '@gateway/domain';
import { ContentCipher, ReplyRouter } from '@gateway/messaging';
import type { ServiceConfig } from '@gateway/service-kit';
import { FakeClock, SequentialIds } from '../testing/in-memory-policy.store';
import { T0 } from '../testing/fixtures';
import { RouteProbe } from './route-probe';

const PRICE = {
  id: 'price-1',
  inputPerMTokMicrousd: 2_500_000n,
  cachedInputPerMTokMicrousd: 1_250_000n,
  outputPerMTokMicrousd: 10_000_000n,
  reasoningPerMTokMicrousd: 10_000_000n,
};
const CONTRACT = {
  routeId: 'rt',
  version: 3,
  providerKind: 'openai-chat',
  upstreamBaseUrl: 'https://api.example',
  upstreamModel: 'gpt-x',
  candidateParam: 'n',
  maxCandidates: 8,
  outputCapParam: 'max_completion_tokens',
  outputCapSemantics: 'per_candidate',
  credentialRef: 'OPENAI',
} as unknown as RouteContractVersionView;
const OPS = { id: OPERATIONS_WORKLOAD_ID, environment: 'operations', budgetMicrousd: 1_000_000n, budgetPeriod: 'month', maxInFlight: 4 };

function setup(opts: {
  admit?: AdmitResult;
  publish?: (cipher: ContentCipher, router: ReplyRouter, value: any) => void;
  price?: boolean;
  withdrawal?: () => Promise<VoidOutcome>;
}) {
  const cipher = new ContentCipher(Buffer.alloc(32, 7));
  const router = new ReplyRouter();
  const admitted: AdmitInput[] = [];
  const published: unknown[] = [];
  const withdrawn: string[] = [];
  const probe = new RouteProbe(
    { timeoutMs: 50 },
    { priceAt: async () => (opts.price === false ? null : PRICE) },
    { workloadById: async () => OPS as never },
    {
      admit: async (input: AdmitInput) => {
        admitted.push(input);
        return opts.admit ?? { ok: true };
      },
    },
    {
      withdraw: (actionId: string) => {
        withdrawn.push(actionId);
        return opts.withdrawal ? opts.withdrawal() : Promise.resolve('voided' as const);
      },
    },
    {
      publish: async (_topic: string, messages: Array<{ value: any }>) => {
        published.push(messages[0].value);
        opts.publish?.(cipher, router, messages[0].value);
      },
    } as never,
    router,
    cipher,
    { instanceId: 'policy-1' } as ServiceConfig,
    new FakeClock(T0),
    new SequentialIds('p'),
  );
  return { probe, admitted, published, router, withdrawn };
}

const target = { routeId: 'rt', alias: 'standard', contract: CONTRACT };

describe('RouteProbe', () => {
  it('reserves against the operations budget, sends an encrypted probe command, and reads counts from the reply', async () => {
    const reply = (cipher: ContentCipher, router: ReplyRouter, value: any) => {
      const cmd = dispatchCommandV1.parse(cipher.decrypt(value.body, value.action_id));
      expect(cmd).toMatchObject({
        attempt_role: 'probe',
        workload_id: OPERATIONS_WORKLOAD_ID,
        effective_candidates: 2,
        output_ceiling: 16,
        route: { route_version: 3, price_revision_id: 'price-1', credential_ref: 'OPENAI' },
      });
      const r: DispatchReplyV1 = {
        kind: 'response',
        http_status: 200,
        attempt_id: 'att-1',
        provider_request_id: 'req-1',
        requested_candidates: 2,
        effective_candidates: 2,
        returned_candidates: 2,
        candidates: [],
        body: {
          id: 'c1',
          choices: [0, 1].map((index) => ({ index, finish_reason: 'stop', message: { role: 'assistant', content: 'ok' } })),
          usage: { prompt_tokens: 11, completion_tokens: 6, total_tokens: 17 },
        },
      };
      queueMicrotask(() => router.deliver(value.action_id, r));
    };
    const { probe, admitted, published } = setup({ publish: reply });
    const o = await probe.run(target);
    expect(admitted).toHaveLength(1);
    expect(admitted[0]).toMatchObject({
      action: { workloadId: OPERATIONS_WORKLOAD_ID, requestedCandidates: 2, effectiveCandidates: 2, outputCeiling: 16 },
      reservation: { priceRevisionId: 'price-1', reservedOutputTokens: 32 },
      tokenRate: null,
      decisionEvent: { attempt_role: 'probe', policy_reason: 'route_probe' },
    });
    expect(published).toHaveLength(1);
    expect(o).toMatchObject({ attempt_id: 'att-1', http_status: 200, returned_candidates: 2, usage_present: true, input_tokens: 11 });
    expect(o.reserved_microusd).toBe(admitted[0].reservation.reservedMicrousd.toString());
  });

  it('an operations budget that cannot fund it: 403 budget_exhausted, nothing published', async () => {
    const { probe, published } = setup({
      admit: { ok: false, code: 'budget_exhausted', scope: 'workload', remainingMicrousd: 0n } as AdmitResult,
    });
    await expect(probe.run(target)).rejects.toMatchObject({ code: 'budget_exhausted' });
    expect(published).toHaveLength(0);
  });

  it('no price in force: 409 route_unpriced before anything is reserved', async () => {
    const { probe, admitted } = setup({ price: false });
    await expect(probe.run(target)).rejects.toMatchObject({ code: 'route_unpriced' });
    expect(admitted).toHaveLength(0);
  });

  it('the broker refusing the command: 503 service_unavailable (not a 500), no waiter left behind, the probe withdrawn', async () => {
    const { probe, router, admitted, withdrawn } = setup({
      publish: () => {
        throw new Error('KafkaJSConnectionError: broker down');
      },
    });
    const refused = probe.run(target);
    await expect(refused).rejects.toMatchObject({ code: 'service_unavailable', headers: { 'retry-after': '5' } });
    await expect(refused).rejects.toThrow(/nothing was sent upstream and its reservation is released/);
    expect(router.pending).toBe(0);
    expect(withdrawn).toEqual([admitted[0].action.id]);
  });

  it.each([
    ['a dispatcher took it first', async () => 'not_voidable' as const],
    ['the withdrawal failed', async () => Promise.reject(new Error('Connection terminated'))],
  ])(
    'the publish failed and the probe could not be withdrawn (%s): 503 that says it may still run, no retry hint',
    async (_, withdrawal) => {
      const { probe } = setup({
        publish: () => {
          throw new Error('KafkaJSRequestTimeoutError');
        },
        withdrawal,
      });
      const refused = probe.run(target);
      await expect(refused).rejects.toMatchObject({ code: 'service_unavailable' });
      await expect(refused).rejects.toThrow(/it may still run/);
      await expect(refused).rejects.not.toMatchObject({ headers: { 'retry-after': '5' } });
    },
  );

  it('no reply before the dispatch deadline: an observation without an answer, never a hang', async () => {
    const { probe } = setup({});
    const o = await probe.run(target);
    expect(o).toMatchObject({ http_status: null, provider_error: 'timeout', usage_present: false });
  }, 10_000);
});
