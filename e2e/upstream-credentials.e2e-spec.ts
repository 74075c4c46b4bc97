import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { GoogleGenAI } from '@google/genai';
import OpenAI, { APIError } from 'openai';
import { actionStatus } from './actions';
import { eventually, openai, searchEverywhere, simLastSeq, simRequestsSince, stack, uid, withSeeder } from './support';

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

function required(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: scripts/test.mjs gives the e2e stack its upstream keys`);
  return v;
}

/**
 * Issue 9: a route contract names its upstream credential; dispatch resolves it (environment or
 * secrets file) and sends it in the provider's header. provider-sim's `key-sha256` directive makes
 * the upstream refuse any other key. The keys are fresh random canaries (scripts/test.mjs), and
 * afterwards none of them may appear in any table, service log or topic.
 */
describe('upstream credentials', () => {
  const run = uid();
  const envKey = required('GATEWAY_CREDENTIAL_E2E_ENV');
  const file = required('GATEWAY_CREDENTIALS_FILE');
  const fileKey = (JSON.parse(fs.readFileSync(file, 'utf8')) as { E2E_FILE: string }).E2E_FILE;
  const rotatedKey = `AIza-canary-rotated-${randomBytes(16).toString('hex')}`;
  const missingRef = `E2E_MISSING_${run.toUpperCase()}`;
  const alias = {
    openai: `e2e-cred-oa-${run}`,
    gemini: `e2e-cred-gm-${run}`,
    rotated: `e2e-cred-rot-${run}`,
    missing: `e2e-cred-miss-${run}`,
  };
  const workloadId = `e2e-cred-${run}`;
  let key: string;
  let client: OpenAI;
  let ai: GoogleGenAI;
  const actionIds: string[] = [];

  beforeAll(async () => {
    key = await withSeeder(async (seed) => {
      const base = { upstreamBaseUrl: stack.providerSim };
      await seed.route({
        ...base,
        routeId: alias.openai,
        alias: alias.openai,
        providerKind: 'openai-chat',
        upstreamModel: `sim-gpt;key-sha256=${sha256(envKey)}`,
        credentialRef: 'E2E_ENV',
      });
      await seed.route({
        ...base,
        routeId: alias.gemini,
        alias: alias.gemini,
        providerKind: 'gemini-generate',
        upstreamModel: `gemini-sim;key-sha256=${sha256(fileKey)}`,
        credentialRef: 'E2E_FILE',
      });
      await seed.route({
        ...base,
        routeId: alias.rotated,
        alias: alias.rotated,
        providerKind: 'gemini-generate',
        upstreamModel: `gemini-sim;key-sha256=${sha256(rotatedKey)}`,
        credentialRef: 'E2E_FILE',
      });
      await seed.route({
        ...base,
        routeId: alias.missing,
        alias: alias.missing,
        providerKind: 'openai-chat',
        upstreamModel: 'sim-gpt',
        credentialRef: missingRef,
      });
      return (await seed.workload({ id: workloadId, allowedAliases: Object.values(alias), deadlineMs: 3000 })).key;
    });
    client = openai(key);
    ai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: stack.admission } });
  });

  it('openai-chat: the key arrives as Authorization: Bearer, whole and streamed', async () => {
    const before = await simLastSeq();
    const { data, response } = await client.chat.completions
      .create({ model: alias.openai, messages: [{ role: 'user', content: 'hello' }] })
      .withResponse();
    expect(data.choices).toHaveLength(1);
    actionIds.push(response.headers.get('x-gateway-action-id') ?? '');
    const stream = await client.chat.completions.create({ model: alias.openai, stream: true, messages: [{ role: 'user', content: 'hi' }] });
    for await (const _chunk of stream) {
      // drain
    }
    const sent = await simRequestsSince(before);
    expect(sent.map((r) => [r.keyHeader, r.keyVerdict, r.status])).toEqual([
      ['authorization', 'matched', 200],
      ['authorization', 'matched', 200],
    ]);
  });

  it('gemini-generate: the key from the secrets file arrives as x-goog-api-key', async () => {
    const before = await simLastSeq();
    const res = await ai.models.generateContent({ model: alias.gemini, contents: 'hello' });
    expect(res.candidates).toHaveLength(1);
    const sent = await simRequestsSince(before);
    expect(sent.map((r) => [r.keyHeader, r.keyVerdict, r.status])).toEqual([['x-goog-api-key', 'matched', 200]]);
  });

  it('a key rotated in the secrets file is used by the next request, without a restart', async () => {
    fs.writeFileSync(file, JSON.stringify({ E2E_FILE: rotatedKey }));
    const before = await simLastSeq();
    const res = await ai.models.generateContent({ model: alias.rotated, contents: 'after rotation' });
    expect(res.candidates).toHaveLength(1);
    const sent = await simRequestsSince(before);
    expect(sent.map((r) => [r.keyHeader, r.keyVerdict, r.status])).toEqual([['x-goog-api-key', 'matched', 200]]);
  });

  it('a credential dispatch cannot resolve: 502 upstream_credential_missing, nothing sent, the reservation voided', async () => {
    const before = await simLastSeq();
    const err = await client.chat.completions
      .create({ model: alias.missing, messages: [{ role: 'user', content: 'hello' }] }, { maxRetries: 0 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(APIError);
    const apiErr = err as APIError;
    expect(apiErr.status).toBe(502);
    expect(apiErr.code).toBe('upstream_credential_missing');
    expect(apiErr.message).toContain(missingRef);
    expect(apiErr.headers?.get('x-should-retry')).toBe('false');
    const actionId = apiErr.headers?.get('x-gateway-action-id') ?? '';
    expect(actionId).not.toBe('');
    actionIds.push(actionId);
    expect(await simRequestsSince(before)).toHaveLength(0);
    // Like a command that was never dispatched: voided after its dispatch deadline, nothing billed.
    const status = await eventually(
      async () => {
        const s = await actionStatus(key, actionId);
        return s.reservation_status === 'voided' ? s : undefined;
      },
      { timeoutMs: 30_000, what: `action ${actionId} voided` },
    );
    expect(status.attempts).toEqual([]);
    expect(await simRequestsSince(before)).toHaveLength(0);
  });

  it('no key appears in any table, service log or topic', async () => {
    const found = await searchEverywhere([envKey, fileKey, rotatedKey], actionIds);
    expect(found).toEqual({ topics: [], database: [], logs: [], sawKeys: { database: true, logs: true } });
  });
});
