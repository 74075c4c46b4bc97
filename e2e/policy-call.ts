import { openAiContractBody } from '@gateway/testing';
import { stack } from './support';

/** One call to the policy API as an operator would make it (fetch, bearer token, JSON). */
export async function policyCall(method: string, path: string, token: string, body?: unknown) {
  const res = await fetch(`${stack.policy}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : {}) as Record<string, any> };
}

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
