import { ChildProcess } from 'node:child_process';
import OpenAI from 'openai';
import { Topics } from '@gateway/contracts';
import { Database } from '@gateway/db';
import {
  counter,
  eventually,
  openai,
  seedSimRouteWorkload,
  simLastSeq,
  simRequestsSince,
  spawnInstance,
  stack,
  stopInstances,
  TopicReader,
  uid,
  withSeeder,
} from './support';

/**
 * Issue 12, overload: while dispatch commands queue longer than ADMISSION_SHED_QUEUE_MS, admission
 * refuses a share of new requests with 503 service_unavailable before anything is reserved or
 * sent. A real queue is slow to make on purpose, so this admission instance (the stack's own
 * services otherwise) runs with a target of 1 ms, which every command's two Kafka hops pass: its
 * share climbs within a few windows of traffic. What leaves the gateway is read at the recording
 * provider and in Postgres: a refused request has no action, no reservation and no provider call,
 * and the SDK sees a retryable 503 with Retry-After.
 */
describe('load shedding on the dispatch queue', () => {
  const run = uid();
  const route = `shed-${run}`;
  const workload = `shed-wl-${run}`;
  const upstreamModel = `sim-shed-${run}`;
  const spawned: ChildProcess[] = [];
  const replies = new TopicReader([Topics.dispatchReplies.name]);
  const db = new Database(stack.databaseUrl, { poolMax: 2 });
  let key: string;
  let admission: { instanceId: string; url: string };

  beforeAll(async () => {
    key = await withSeeder((seed) => seedSimRouteWorkload(seed, route, upstreamModel, workload));
    await replies.start();
    admission = await spawnInstance('admission', 3, spawned, { ADMISSION_SHED_QUEUE_MS: '1', ADMISSION_SHED_WINDOW_MS: '100' });
  }, 180_000);

  afterAll(async () => {
    await stopInstances(spawned);
    await replies.stop();
    await db.close();
  }, 30_000);

  const body = { model: route, max_tokens: 20, messages: [{ role: 'user' as const, content: 'shed or served' }] };

  it('refuses a share of requests 503 before reserving anything, and nothing refused reaches the provider', async () => {
    const client = openai(key, 'current', { admission: admission.url, maxRetries: 0 });
    const before = await simLastSeq();
    const served: string[] = [];
    const refused: InstanceType<typeof OpenAI.APIError>[] = [];
    // Bursts of 16 until the share has refused some: each burst's replies are a window's evidence.
    await eventually(
      async () => {
        const outcomes = await Promise.allSettled(Array.from({ length: 16 }, () => client.chat.completions.create(body).withResponse()));
        for (const o of outcomes) {
          if (o.status === 'fulfilled') served.push(o.value.response.headers.get('x-gateway-action-id') ?? 'none');
          else if (o.reason instanceof OpenAI.APIError && o.reason.status === 503) refused.push(o.reason);
          else throw o.reason;
        }
        return refused.length >= 3 ? true : undefined;
      },
      { timeoutMs: 30_000, what: 'requests refused by the load shedding' },
    );
    for (const err of refused) {
      expect(err.code).toBe('service_unavailable');
      expect(err.message).toContain('shedding load');
      expect(err.headers?.get('retry-after')).toBe('1');
      expect(err.headers?.get('x-should-retry')).toBe('true');
      expect(err.headers?.get('x-gateway-action-id')).toBeNull();
    }
    expect(served.length).toBeGreaterThan(0);
    expect(served).not.toContain('none');

    // What left the gateway: one provider call per served request, none for a refused one.
    const calls = (await simRequestsSince(before)).filter((r) => r.model === upstreamModel);
    expect(calls).toHaveLength(served.length);
    // What it kept: an action and a reservation for each served request, nothing for a refused one.
    const { rows } = await db.pool.query<{ actions: number; reservations: number }>(
      `SELECT count(DISTINCT a.id)::int AS actions, count(r.action_id)::int AS reservations
         FROM action a LEFT JOIN reservation r ON r.action_id = a.id WHERE a.workload_id = $1`,
      [workload],
    );
    expect(rows[0]).toEqual({ actions: served.length, reservations: served.length });
    const metrics = `${admission.url}/metrics`;
    expect(await counter(metrics, 'gateway_admission_shed_total')).toBe(refused.length);

    // Dispatch said how long it held each command, which is how admission told the queue apart.
    const held = replies
      .json<{ action_id: string; reply_to: string; held_ms?: unknown }>()
      .filter((m) => m.reply_to === admission.instanceId && served.includes(m.action_id));
    expect(held.length).toBeGreaterThan(0);
    for (const m of held) expect(Number.isSafeInteger(m.held_ms) && (m.held_ms as number) >= 0).toBe(true);

    // Without traffic there is no queue to read: the share falls back to 0 and a request is served.
    await eventually(
      async () => {
        const text = await (await fetch(metrics)).text();
        const line = text.split('\n').find((l) => l.startsWith('gateway_admission_shed_share{'));
        return line && Number(line.slice(line.lastIndexOf(' ') + 1)) === 0 ? true : undefined;
      },
      { timeoutMs: 10_000, what: 'the shed share back to 0' },
    );
    const again = await client.chat.completions.create(body);
    expect(again.choices).toHaveLength(1);
  }, 90_000);
});
