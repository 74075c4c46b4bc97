import { openAiContractBody } from '@gateway/testing';
import { stack } from './support';

/**
 * One call to a gateway API as an operator would make it (fetch, bearer token, JSON body): the
 * status, the raw text (a CSV answer) and the body parsed when it is JSON ({} when empty).
 */
export async function operatorCall(base: string, method: string, path: string, token: string, body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  const json = res.headers.get('content-type')?.includes('json') ?? true;
  return { status: res.status, text, body: (json && text ? JSON.parse(text) : {}) as Record<string, any> };
}

/** One call to the policy API as an operator would make it. */
export const policyCall = (method: string, path: string, token: string, body?: unknown) =>
  operatorCall(stack.policy, method, path, token, body);

/** One call to the reconciliation API as an operator or finance would make it. */
export const reconciliationCall = (method: string, path: string, token: string, body?: unknown) =>
  operatorCall(process.env.E2E_RECONCILIATION_URL!, method, path, token, body);

/** An openai-chat contract on the provider simulator, as the policy API takes it. */
export function simContract(overrides: Record<string, unknown> = {}) {
  return openAiContractBody(stack.providerSim, { upstream_model: 'sim-gpt', ...overrides });
}

export const simPrice = {
  input_per_mtok_microusd: '2500000',
  cached_input_per_mtok_microusd: '1250000',
  output_per_mtok_microusd: '10000000',
  reasoning_per_mtok_microusd: '10000000',
};
