import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Database } from '@gateway/db';
import { settledAction } from './actions';
import { Topics } from '@gateway/contracts';
import {
  counter,
  eventually,
  openai,
  simLastSeq,
  simRequestsSince,
  stack,
  TopicReader,
  uid,
  withSeeder,
  seedSimRouteWorkload,
} from './support';

/**
 * A client that gives up while its request is being admitted (its own timeout, most often, when
 * admission waits for a busy budget row). Nobody would read the answer, so the gateway does not
 * send the request to the provider: the action is withdrawn at once, with its slot, its hold and
 * its Idempotency-Key. Here the wait is a real row lock on the workload's in-flight counter, held by
 * the test, so the order (admitting, client gone, reservation committed) is certain.
 */
describe('a client that leaves before its request is dispatched', () => {
  const run = uid();
  const route = `client-left-${run}`;
  const workload = `client-left-wl-${run}`;
  let key: string;
  const db = new Database(stack.databaseUrl, { poolMax: 2 });

  beforeAll(async () => {
    key = await withSeeder((seed) => seedSimRouteWorkload(seed, route, 'sim-gpt', workload));
  });

  afterAll(() => db.close());

  const body = { model: route, max_tokens: 50, messages: [{ role: 'user' as const, content: 'an answer nobody will read' }] };

  it('is never sent upstream: admitted, it is withdrawn (money, slot and key back); still queued, it is dropped unreserved', async () => {
    // One answered request first: it creates the workload's counter rows.
    await openai(key).chat.completions.create(body);
    const idem = `left-${run}`;
    const beforeAbandoned = await simLastSeq();

    const locker = await db.pool.connect();
    try {
      await locker.query('BEGIN');
      await locker.query(`SELECT 1 FROM quota_counter WHERE scope = 'workload' AND scope_id = $1 FOR UPDATE`, [workload]);
      const [{ pid }] = (await locker.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows;

      const send = (headers: Record<string, string> = {}) => {
        const req = http.request(new URL('/v1/chat/completions', stack.admission), {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
        });
        req.on('error', () => undefined); // the abort below
        req.end(JSON.stringify(body));
        return req;
      };
      const req = send({ 'idempotency-key': idem });
      // Admission's reservation statement now waits for the row this test holds.
      await eventually(
        async () => {
          const { rows } = await db.pool.query<{ n: number }>(
            'SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))',
            [pid],
          );
          return rows[0].n > 0 ? true : undefined;
        },
        { what: "admission's reservation waiting for the locked counter row" },
      );
      // A second request waits behind that statement, in admission's queue for the next one.
      const queued = send();
      await sleep(300);
      req.destroy(); // both clients give up
      queued.destroy();
      await sleep(200); // their connections' close reaches admission (loopback: well within this)
      await locker.query('ROLLBACK'); // the reservation commits now, after the client left
    } finally {
      locker.release();
    }

    const left = await eventually(
      async () => {
        const actions = await db.prisma.action.findMany({ where: { workloadId: workload }, orderBy: { createdAt: 'asc' } });
        return actions.length === 2 && actions[1].status === 'expired' ? actions[1] : undefined;
      },
      { what: 'the abandoned action, withdrawn' },
    );
    expect(left.statusReason).toMatch(/withdrawn by admission/);
    expect(left.idempotencyKey).toBeNull(); // released: nothing was sent
    expect(await db.prisma.attempt.count({ where: { actionId: left.id } })).toBe(0);
    expect(await db.prisma.reservation.findUniqueOrThrow({ where: { actionId: left.id } })).toMatchObject({ status: 'voided' });
    const slot = await db.prisma.quotaCounter.findFirstOrThrow({ where: { scope: 'workload', scopeId: workload } });
    expect(slot.inFlight).toBe(0);
    const metrics = await (await fetch(`${stack.admission}/metrics`)).text();
    expect(metrics).toMatch(/gateway_admission_withdrawals_total\{cause="client_left",outcome="voided"[^}]*\} [1-9]/);

    // The queued one was dropped before its statement: nothing was ever reserved for it.
    await sleep(300); // anything dispatched or admitted late would have reached the simulator and the table by now
    expect(await db.prisma.action.count({ where: { workloadId: workload } })).toBe(2);

    // The provider never saw either; the retry with the same key is a new action, sent once.
    const before = await simLastSeq();
    expect(before).toBe(beforeAbandoned);
    const retried = await openai(key)
      .chat.completions.create(body, { headers: { 'Idempotency-Key': idem } })
      .withResponse();
    expect(retried.response.status).toBe(200);
    expect(retried.response.headers.get('x-gateway-action-id')).not.toBe(left.id);
    expect(retried.response.headers.get('x-gateway-idempotent-replay')).toBeNull();
    expect(await simRequestsSince(before)).toHaveLength(1);
  }, 60_000);
});

/**
 * A stream client that leaves once its answer is coming. The provider call runs to its end (its
 * usage chunk is the attempt's evidence), but admission tells dispatch the client is gone, and
 * dispatch stops relaying the chunks nobody would read. provider-sim's `stall` holds the middle of
 * the stream long enough for the stop to arrive first.
 */
describe('a stream client that leaves mid-stream', () => {
  const run = uid();
  const route = `stream-left-${run}`;
  let key: string;
  const dispatchMetrics = `${stack.dispatch}/metrics`;
  const admissionStops = () =>
    counter(`${stack.admission}/metrics`, 'gateway_admission_relay_stops_total', { reason: 'client_left', outcome: 'published' });

  beforeAll(async () => {
    key = await withSeeder((seed) => seedSimRouteWorkload(seed, route, 'sim-gpt;words=400;stall=1500', `stream-left-wl-${run}`));
  });

  it('is called once and settles from its usage chunk; the chunks after the client left are not relayed', async () => {
    const before = await simLastSeq();
    const stopsBefore = await admissionStops();
    const relaysBefore = await counter(dispatchMetrics, 'gateway_dispatch_stream_relays_stopped_total');
    const withheldBefore = await counter(dispatchMetrics, 'gateway_dispatch_stream_chunks_withheld_total');

    const { data: stream, response } = await openai(key)
      .chat.completions.create({ model: route, stream: true, messages: [{ role: 'user', content: 'a long answer, please' }] })
      .withResponse();
    const actionId = String(response.headers.get('x-gateway-action-id'));
    const chunks = stream[Symbol.asyncIterator]();
    expect((await chunks.next()).done).toBe(false);
    stream.controller.abort(); // the client leaves during the stream's first half

    const status = await settledAction(key, actionId);
    expect(status.attempts).toHaveLength(1);
    expect(status.attempts[0]).toMatchObject({ status: 'settled', usage_source: 'stream_final_chunk' });
    expect(await simRequestsSince(before)).toHaveLength(1);

    expect(await admissionStops()).toBe(stopsBefore + 1);
    expect(await counter(dispatchMetrics, 'gateway_dispatch_stream_relays_stopped_total')).toBe(relaysBefore + 1);
    // the stream's second half (over a hundred events) came after the stop: read, not relayed
    const withheld = (await counter(dispatchMetrics, 'gateway_dispatch_stream_chunks_withheld_total')) - withheldBefore;
    expect(withheld).toBeGreaterThan(100);

    // What travelled: one stop naming the action and why, nothing else in it; and on the replies
    // topic only the chunks relayed before it (no stream end), fewer than the provider sent.
    const topics = new TopicReader([Topics.dispatchControls.name, Topics.dispatchReplies.name]);
    await topics.start();
    try {
      const stop = await topics.waitFor<Record<string, unknown>>(
        (m) => m.action_id === actionId && 'kind' in m,
        'the stop on the controls topic',
      );
      expect(Object.keys(stop).sort()).toEqual(['action_id', 'event_id', 'kind', 'reason', 'timestamp']);
      expect(stop).toMatchObject({ kind: 'stop_relay', reason: 'client_left' });
      const replies = await eventually(
        async () => {
          const own = topics.messages.filter((m) => m.key === actionId && !m.value.includes('"stop_relay"'));
          return own.length > 0 ? own : undefined;
        },
        { what: "the action's replies" },
      );
      // the stop came during the first half: fewer relayed than withheld
      expect(replies.length).toBeLessThan(withheld);
    } finally {
      await topics.stop();
    }
  }, 60_000);
});

/**
 * A client that leaves after its command was sent, before a dispatcher took it (the command waits
 * in the topic, or behind others under load). Nobody can ask for the answer again (no
 * Idempotency-Key), so the action is withdrawn as if never sent, and the claim refuses the command
 * when dispatch comes to it. The stack's dispatch is frozen (SIGSTOP, well inside its consumer's
 * session timeout) so the order is certain.
 */
describe('a client that leaves after its command was sent, before a dispatcher took it', () => {
  const run = uid();
  const route = `client-left-queued-${run}`;
  const workload = `client-left-queued-wl-${run}`;
  let key: string;
  const db = new Database(stack.databaseUrl, { poolMax: 2 });

  beforeAll(async () => {
    key = await withSeeder((seed) => seedSimRouteWorkload(seed, route, 'sim-gpt', workload));
  });

  afterAll(() => db.close());

  it('is withdrawn: money and slot back, the command refused, the provider never called', async () => {
    const body = { model: route, max_tokens: 50, messages: [{ role: 'user' as const, content: 'an answer nobody will wait for' }] };
    await openai(key).chat.completions.create(body); // the workload's counter rows exist
    const withdrawnBefore = await counter(`${stack.admission}/metrics`, 'gateway_admission_withdrawals_total', {
      cause: 'client_left_queued',
      outcome: 'voided',
    });
    const before = await simLastSeq();
    const refused = () => counter(`${stack.dispatch}/metrics`, 'gateway_dispatch_refused_total');
    const refusedBefore = await refused();
    const dispatchPid = Number(fs.readFileSync(path.join(stack.logDir, 'dispatch.pid'), 'utf8'));
    process.kill(dispatchPid, 'SIGSTOP');
    let actionId: string;
    try {
      const req = http.request(new URL('/v1/chat/completions', stack.admission), {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      });
      req.on('error', () => undefined); // the destroy below
      req.end(JSON.stringify(body));
      const admitted = await eventually(
        async () => (await db.prisma.action.findFirst({ where: { workloadId: workload, status: 'admitted' } })) ?? undefined,
        { what: 'the action admitted, its command on its way to a frozen dispatcher' },
      );
      actionId = admitted.id;
      await sleep(200); // the command's publish is acknowledged (the broker is up)
      req.destroy(); // the client gives up
      await eventually(
        async () => ((await db.prisma.action.findUniqueOrThrow({ where: { id: actionId } })).status === 'expired' ? true : undefined),
        { what: 'the action withdrawn' },
      );
    } finally {
      process.kill(dispatchPid, 'SIGCONT');
    }
    // Dispatch takes the command now, and its claim refuses it.
    await eventually(async () => ((await refused()) > refusedBefore ? true : undefined), { what: 'the command refused by the claim' });
    const left = await db.prisma.action.findUniqueOrThrow({ where: { id: actionId } });
    expect(left.statusReason).toMatch(/withdrawn by admission/);
    expect(await db.prisma.attempt.count({ where: { actionId } })).toBe(0);
    expect(await db.prisma.reservation.findUniqueOrThrow({ where: { actionId } })).toMatchObject({ status: 'voided' });
    const slot = await db.prisma.quotaCounter.findFirstOrThrow({ where: { scope: 'workload', scopeId: workload } });
    expect(slot.inFlight).toBe(0);
    expect(
      await counter(`${stack.admission}/metrics`, 'gateway_admission_withdrawals_total', {
        cause: 'client_left_queued',
        outcome: 'voided',
      }),
    ).toBe(withdrawnBefore + 1);
    expect(await simRequestsSince(before)).toHaveLength(0); // the provider never saw it
  }, 60_000);
});
