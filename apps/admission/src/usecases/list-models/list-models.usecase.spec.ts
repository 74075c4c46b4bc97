import type { RouteContract, WorkloadPolicy } from '@gateway/db';
import { DEFAULT_MEDIA_INPUT_TOKENS, DomainError, hashCredential } from '@gateway/domain';
import { CountTokens } from '../count-tokens/count-tokens.usecase';
import { ListModels } from './list-models.usecase';

const KEY = 'gw_key';

function route(alias: string, providerKind: RouteContract['providerKind']): RouteContract {
  const gemini = providerKind === 'gemini-generate';
  return {
    routeId: `rt-${alias}`,
    alias,
    routeCreatedAt: new Date('2026-01-01T00:00:00Z'),
    version: 2,
    providerKind,
    upstreamBaseUrl: 'https://upstream.example',
    upstreamModel: 'm',
    credentialRef: null,
    upstreamIdempotencyHeader: null,
    candidateParam: gemini ? 'candidateCount' : 'n',
    maxCandidates: 4,
    outputCapParam: gemini ? 'maxOutputTokens' : 'max_completion_tokens',
    outputCapSemantics: 'per_candidate',
    usageShape: 'x',
    streamingUsage: 'x',
    gatewayVersion: '1',
    clientLibraryVersion: '1',
    verifiedAt: null,
    verifiedBy: null,
    verificationTtlSeconds: 3600,
    pricedFeatures: [],
    mediaInputTokens: DEFAULT_MEDIA_INPUT_TOKENS,
  };
}

const ROUTES = [
  route('oa-b', 'openai-chat'),
  route('oa-a', 'openai-compatible'),
  route('gm', 'gemini-generate'),
  route('hidden', 'openai-chat'),
];

const catalog = {
  async workloadByKeyHash(hash: string): Promise<WorkloadPolicy | null> {
    if (hash !== hashCredential(KEY)) return null;
    return { id: 'wl-1', allowedAliases: ['oa-b', 'oa-a', 'gm', 'gone'] } as WorkloadPolicy;
  },
  async routeByAlias(alias: string) {
    return ROUTES.find((r) => r.alias === alias) ?? null;
  },
};

describe('ListModels', () => {
  const models = new ListModels(catalog);

  it('lists the workload’s aliases whose route speaks the dialect, sorted; unmapped and missing routes are left out', async () => {
    expect((await models.execute(KEY, 'openai-chat')).map((e) => e.alias)).toEqual(['oa-a', 'oa-b']);
    expect((await models.execute(KEY, 'gemini-generate')).map((e) => e.alias)).toEqual(['gm']);
  });

  it.each([
    ['a key', null, 'openai-chat', 'oa-a', 'unauthorized'],
    ['a known key', 'gw_other', 'openai-chat', 'oa-a', 'unauthorized'],
    ['an alias the workload may use', KEY, 'openai-chat', 'hidden', 'unknown_route'],
    ['a route that exists', KEY, 'openai-chat', 'gone', 'unknown_route'],
    ['the right dialect', KEY, 'gemini-generate', 'oa-a', 'unknown_route'],
  ] as const)('one model needs %s', async (_what, key, dialect, alias, code) => {
    await expect(models.one(key, dialect, alias)).rejects.toMatchObject({ code });
    await expect(models.one(key, dialect, alias)).rejects.toBeInstanceOf(DomainError);
  });
});

describe('CountTokens', () => {
  const count = new CountTokens(new ListModels(catalog));
  const body = { contents: [{ role: 'user', parts: [{ text: 'How many tokens is this?' }] }] };

  it('answers the admission estimate, the same for a wrapped generateContentRequest', async () => {
    const direct = await count.execute(KEY, 'gm', body);
    expect(direct.totalTokens).toBeGreaterThan(0);
    expect(await count.execute(KEY, 'gm', { generateContentRequest: { model: 'models/gm', ...body } })).toEqual(direct);
    const image = { contents: [{ parts: [{ text: 'x' }, { inlineData: { mimeType: 'image/png', data: 'AAAA' } }] }] };
    expect((await count.execute(KEY, 'gm', image)).totalTokens).toBeGreaterThan(DEFAULT_MEDIA_INPUT_TOKENS.image);
  });

  it.each([
    ['no contents', {}, 'invalid_request'],
    ['a remote file it cannot price', { contents: [{ parts: [{ fileData: { fileUri: 'gs://b/f' } }] }] }, 'unpriced_input'],
  ])('%s is refused', async (_what, raw, code) => {
    await expect(count.execute(KEY, 'gm', raw)).rejects.toMatchObject({ code });
  });
});
