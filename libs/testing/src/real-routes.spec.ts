import { checkUpstreamUrl, isCredentialRef } from '@gateway/domain';
import { REAL_ROUTES, realRoutesFor, realRouteWiring } from './real-routes';

describe('real provider routes for npm start', () => {
  it.each([
    [{}, []],
    [{ OPENAI_API_KEY: 'sk-x' }, ['gpt-4.1-mini']],
    [{ GEMINI_API_KEY: 'AIza-x' }, ['gemini-2.5-flash']],
    [{ OPENAI_API_KEY: 'sk-x', GEMINI_API_KEY: 'AIza-x' }, ['gpt-4.1-mini', 'gemini-2.5-flash']],
    [{ OPENAI_API_KEY: '  ', GEMINI_API_KEY: '' }, []],
  ])('%j → %j', (env, ids) => {
    expect(realRoutesFor(env).map((r) => r.contract.routeId)).toEqual(ids);
  });

  it('wires credentials by name and allowlists exactly the provider hosts; never carries a key', () => {
    const env = { OPENAI_API_KEY: 'sk-secret-1', GEMINI_API_KEY: 'AIza-secret-2' };
    const wiring = realRouteWiring(realRoutesFor(env));
    expect(wiring).toEqual({
      credentials: { GATEWAY_CREDENTIAL_OPENAI: 'OPENAI_API_KEY', GATEWAY_CREDENTIAL_GEMINI: 'GEMINI_API_KEY' },
      hosts: ['api.openai.com', 'generativelanguage.googleapis.com'],
    });
    expect(JSON.stringify(wiring)).not.toMatch(/secret/);
    expect(realRouteWiring([])).toEqual({ credentials: {}, hosts: [] });
  });

  it.each(REAL_ROUTES.map((r) => [r.contract.routeId, r] as const))('%s: a contract the policy API would accept', (_id, r) => {
    const { hosts } = realRouteWiring([r]);
    expect(checkUpstreamUrl(r.contract.upstreamBaseUrl, hosts)).toEqual({ ok: true, host: r.host });
    // The adapters append /v1/... and /v1beta/...: a base URL ending in a version would double it.
    expect(r.contract.upstreamBaseUrl).not.toMatch(/\/v1(beta)?\/?$/);
    expect(isCredentialRef(r.contract.credentialRef ?? '')).toBe(true);
    expect(r.contract.upstreamModel).toBe(r.contract.alias);
    for (const rate of Object.values(r.price)) {
      expect(typeof rate).toBe('bigint');
      expect(rate).toBeGreaterThan(0n);
    }
    // cached input is cheaper than input, output dearer: a typo of a zero would show here
    expect(r.price.cachedInputPerMTokMicrousd).toBeLessThan(r.price.inputPerMTokMicrousd);
    expect(r.price.outputPerMTokMicrousd).toBeGreaterThan(r.price.inputPerMTokMicrousd);
  });
});
