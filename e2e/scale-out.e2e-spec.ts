import { ChildProcess } from 'node:child_process';
import { Admin, AssignerProtocol, Kafka, logLevel } from 'kafkajs';
import { recipientPartition, Topics } from '@gateway/contracts';
import {
  eventually,
  gemini,
  openai,
  seedSimRoutes,
  simLastSeq,
  simRequestsSince,
  spawnInstance,
  stack,
  stopInstances,
  TopicReader,
  uid,
  withSeeder,
} from './support';

/** The consumer groups that share partitions between instances (apps/*\/src/consumers). */
const DISPATCH_GROUP = 'gateway-dispatch';
const SETTLEMENT_GROUP = 'gateway-settlement';

/**
 * Issue 12, scale-out: the stack `npm test` started (one instance of each service) plus a second
 * admission, dispatch and settlement instance started here, named as `npm start -- --scale=2`
 * names them, is the two-of-each stack of docs/scaling.md. The official SDKs are served through
 * both admission ports; every reply reaches the admission instance that holds the client's
 * connection whichever dispatch instance ran the attempt (on that instance's partition of the
 * replies topic, the only one it reads); then the second dispatch instance is
 * killed (SIGKILL) mid-traffic and every admitted action still ends explicitly: each attempt has
 * exactly one ledger row or an open reconciliation case, and no reservation stays pending.
 */
describe('scale-out: two admission, dispatch and settlement instances on one Kafka and Postgres', () => {
  const run = uid();
  const chat = `scale-oa-${run}`;
  const gm = `scale-gm-${run}`;
  const slow = `scale-slow-${run}`;
  const stopped = `scale-stopped-${run}`;
  const keyed = `scale-keyed-${run}`;
  const workloadId = `scale-wl-${run}`;
  const stackInstance = process.env.GATEWAY_INSTANCE_ID ?? '';
  let key: string;
  let admin: Admin;
  const replies = new TopicReader([Topics.dispatchReplies.name]);
  const extra: ChildProcess[] = [];
  let admission2: { instanceId: string; url: string };
  let dispatch2: { child: ChildProcess; instanceId: string; url: string };
  let settlement2: { instanceId: string };

  /** The members of a consumer group once it is stable, by client id (= instance id), with their partition counts. */
  const stableMembers = async (group: string, topic: string): Promise<Map<string, number> | undefined> => {
    const { groups } = await admin.describeGroups([group]);
    if (groups[0]?.state !== 'Stable') return undefined;
    return new Map(
      groups[0].members.map((m) => [
        m.clientId,
        AssignerProtocol.MemberAssignment.decode(m.memberAssignment)?.assignment[topic]?.length ?? 0,
      ]),
    );
  };

  /** The reply envelopes dispatch sent for one action: to whom they were addressed, on which partition. */
  const replyTargets = (actionId: string) =>
    replies.messages
      .map((m) => ({ ...(JSON.parse(m.value) as { action_id: string; reply_to: string }), partition: m.partition }))
      .filter((r) => r.action_id === actionId)
      .map((r) => `${r.reply_to}@${r.partition}`);

  /** Waits until the second dispatch instance has an attempt of `routeId` in flight upstream. */
  const untilInFlightOnSecondDispatch = (routeId: string) =>
    eventually(
      () =>
        withSeeder(async (_s, db) => {
          const rows = await db.prisma.$queryRaw<Array<{ n: bigint }>>`
            SELECT count(*) AS n FROM attempt a JOIN dispatch_claim c ON c.action_id = a.action_id AND c.attempt_no = a.attempt_no
            WHERE a.route_id = ${routeId} AND a.status = 'in_flight' AND c.claimed_by = ${dispatch2.instanceId}`;
          return Number(rows[0].n) > 0 ? true : undefined;
        }),
      { timeoutMs: 30000, what: 'an attempt in flight on the second dispatch instance' },
    );

  /**
   * The `count` actions of `routeId` once every one has ended (no reservation pending), after
   * checking that each of their attempts has exactly one ledger row, or none and an open
   * reconciliation case. Returns the actions and those cases.
   */
  const endedActions = async (routeId: string, count: number) => {
    const actions = await eventually(
      () =>
        withSeeder(async (_s, db) => {
          const rows = await db.prisma.action.findMany({
            where: { workloadId, routeId },
            select: { id: true, reservation: { select: { status: true } }, attempts: { select: { id: true } } },
          });
          return rows.length === count && rows.every((r) => r.reservation && r.reservation.status !== 'pending') ? rows : undefined;
        }),
      { timeoutMs: 60000, what: `every reservation of ${routeId} resolved` },
    );
    const attemptIds = actions.flatMap((a) => a.attempts.map((t) => t.id));
    const [ledger, cases] = await withSeeder((_s, db) =>
      Promise.all([
        db.prisma.ledgerEntry.findMany({ where: { attemptId: { in: attemptIds } }, select: { attemptId: true } }),
        db.prisma.reconciliationCase.findMany({
          where: { attemptId: { in: attemptIds }, status: 'open' },
          select: { attemptId: true, reason: true },
        }),
      ]),
    );
    for (const attemptId of attemptIds) {
      const rows = ledger.filter((l) => l.attemptId === attemptId).length;
      const open = cases.filter((c) => c.attemptId === attemptId).length;
      expect({ attemptId, ledger: rows, cases: open }).toEqual({ attemptId, ledger: rows === 1 ? 1 : 0, cases: rows === 1 ? 0 : 1 });
    }
    return { actions, attemptIds, cases };
  };

  beforeAll(async () => {
    key = await withSeeder(async (seed) => {
      await seedSimRoutes(seed, { chat, gemini: gm });
      await seed.route({
        routeId: slow,
        alias: slow,
        providerKind: 'openai-chat',
        upstreamBaseUrl: stack.providerSim,
        upstreamModel: 'sim-gpt;latency=1500',
      });
      await seed.route({
        routeId: stopped,
        alias: stopped,
        providerKind: 'openai-chat',
        upstreamBaseUrl: stack.providerSim,
        upstreamModel: 'sim-gpt;latency=1500',
      });
      await seed.route({
        routeId: keyed,
        alias: keyed,
        providerKind: 'openai-chat',
        upstreamBaseUrl: stack.providerSim,
        upstreamModel: 'sim-gpt;latency=4000',
      });
      return (await seed.workload({ id: workloadId, allowedAliases: [chat, gm, slow, stopped, keyed], deadlineMs: 12000 })).key;
    });
    admin = new Kafka({ clientId: `e2e-admin-${run}`, brokers: stack.brokers, logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    await replies.start();
    [admission2, dispatch2, settlement2] = await Promise.all([
      spawnInstance('admission', 2, extra),
      spawnInstance('dispatch', 2, extra),
      spawnInstance('settlement', 2, extra),
    ]);
    // Both instances of each consumer group hold partitions before traffic starts.
    for (const [group, topic, ours] of [
      [DISPATCH_GROUP, Topics.dispatchCommands.name, dispatch2.instanceId],
      [SETTLEMENT_GROUP, Topics.attemptCompleted.name, settlement2.instanceId],
    ]) {
      await eventually(
        async () => {
          const members = await stableMembers(group, topic);
          return members && (members.get(ours) ?? 0) > 0 && [...members.values()].filter((n) => n > 0).length >= 2 ? true : undefined;
        },
        { timeoutMs: 30000, what: `${group} shared by two instances` },
      );
    }
  }, 180_000);

  afterAll(async () => {
    await stopInstances(extra);
    await replies.stop();
    await admin.disconnect();
  }, 30_000);

  it('serves the official SDKs through both admission instances; each reply goes to the instance holding the connection', async () => {
    /** One whole chat completion, one streamed, one generateContent through one admission instance. */
    const sdkCases = async (admission: string, via: string, i: number): Promise<Array<{ actionId: string; via: string }>> => {
      const { data, response } = await openai(key, 'current', { admission })
        .chat.completions.create({ model: chat, messages: [{ role: 'user', content: `scale ${i}` }] })
        .withResponse();
      expect(data.choices[0].message.content?.length).toBeGreaterThan(0);

      const streamed = await openai(key, 'current', { admission })
        .chat.completions.create({
          model: chat,
          messages: [{ role: 'user', content: `scale stream ${i}` }],
          stream: true,
          stream_options: { include_usage: true },
        })
        .withResponse();
      let text = '';
      for await (const chunk of streamed.data) text += chunk.choices[0]?.delta?.content ?? '';
      expect(text.length).toBeGreaterThan(0);

      const g = await gemini(key, 'current', { admission }).models.generateContent({ model: gm, contents: `scale gemini ${i}` });
      expect(g.text?.length).toBeGreaterThan(0);
      return [
        response.headers.get('x-gateway-action-id')!,
        streamed.response.headers.get('x-gateway-action-id')!,
        g.sdkHttpResponse!.headers!['x-gateway-action-id'],
      ].map((actionId) => ({ actionId, via }));
    };
    // 12 actions per instance, four clients at a time on each: both dispatch instances run some of
    // each admission instance's actions (all on one side: p ≈ 2⁻²³).
    const served = (
      await Promise.all(
        [0, 1, 2, 3].flatMap((i) => [sdkCases(stack.admission, stackInstance, i), sdkCases(admission2.url, admission2.instanceId, i)]),
      )
    ).flat();

    // Every reply was addressed to the admission instance that admitted the action (and only to
    // it), on the one partition that instance reads.
    for (const { actionId, via } of served) {
      const targets = await eventually(async () => {
        const t = replyTargets(actionId);
        return t.length > 0 ? t : undefined;
      });
      expect(new Set(targets)).toEqual(new Set([`${via}@${recipientPartition(via, Topics.dispatchReplies.partitions)}`]));
    }
    // …and both dispatch instances ran attempts: the replies crossed instances.
    const claimers = await withSeeder((_s, db) =>
      db.prisma.dispatchClaim.findMany({ where: { actionId: { in: served.map((s) => s.actionId) } }, select: { claimedBy: true } }),
    );
    expect(new Set(claimers.map((c) => c.claimedBy))).toEqual(new Set([stackInstance, dispatch2.instanceId]));
  }, 120_000);

  it('an Idempotency-Key retry: on the other admission instance 409 idempotency_key_in_progress (Retry-After); on the first one the first answer; one upstream call', async () => {
    const idem = `scale-idem-${run}`;
    const before = await simLastSeq();
    const post = (admission: string) =>
      fetch(`${admission}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': idem },
        body: JSON.stringify({ model: keyed, messages: [{ role: 'user', content: 'keyed across instances' }] }),
      });
    const first = post(stack.admission);
    const actionId = await eventually(
      () =>
        withSeeder(async (_s, db) => {
          const a = await db.prisma.action.findFirst({ where: { workloadId, idempotencyKey: idem }, select: { id: true } });
          return a?.id;
        }),
      { what: 'the first request admitted' },
    );
    // The provider takes 4 s: the first is still running on the stack's admission instance.
    const elsewhere = await post(admission2.url);
    expect(elsewhere.status).toBe(409);
    expect(((await elsewhere.json()) as { error: { code: string } }).error.code).toBe('idempotency_key_in_progress');
    expect(elsewhere.headers.get('retry-after')).toBe('1');
    expect(elsewhere.headers.get('x-should-retry')).toBe('true');
    expect(elsewhere.headers.get('x-gateway-action-id')).toBe(actionId);

    const [answered, retried] = await Promise.all([first, post(stack.admission)]);
    expect([answered.status, retried.status]).toEqual([200, 200]);
    expect(retried.headers.get('x-gateway-idempotent-replay')).toBe('true');
    expect(retried.headers.get('x-gateway-action-id')).toBe(actionId);
    expect(await retried.json()).toEqual(await answered.json());
    expect(await simRequestsSince(before)).toHaveLength(1);
  });

  it('a dispatch instance stopped past its session timeout, then continued: nothing goes upstream twice, every action ends, and it takes partitions again', async () => {
    // SIGSTOP: a frozen VM or container, a process held in a debugger. The group hands the
    // stopped instance's partitions to the other one (session timeout 6 s), which is delivered
    // again every command whose offset was not committed; once continued, the stopped instance
    // goes on with what it had in hand. The claims decide who runs what: one upstream request per
    // attempt, never one without its attempt row.
    const admissions = [stack.admission, admission2.url];
    const fromSeq = await simLastSeq();
    const pending: Array<PromiseLike<number>> = [];
    const send = (i: number) =>
      pending.push(
        openai(key, 'current', { admission: admissions[i % 2] })
          .chat.completions.create({ model: stopped, messages: [{ role: 'user', content: `stopped ${i}` }] }, { maxRetries: 0 })
          .then(
            () => 200,
            (e: { status?: number }) => e.status ?? 0,
          ),
      );
    // Traffic before, during and after the stop: one request every 200 ms for 14 s.
    let i = 0;
    const traffic = (async () => {
      for (const until = Date.now() + 14_000; Date.now() < until; i++) {
        send(i);
        await new Promise((r) => setTimeout(r, 200));
      }
    })();
    await untilInFlightOnSecondDispatch(stopped);
    dispatch2.child.kill('SIGSTOP');
    await new Promise((r) => setTimeout(r, 10_000));
    dispatch2.child.kill('SIGCONT');
    await traffic;
    const statuses = await Promise.all(pending);
    for (const s of statuses) expect([200, 504]).toContain(s);
    // the other instance served through the stop
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(statuses.length / 2);

    // Every admitted action ends: no reservation stays pending, each attempt has one ledger row or
    // none and an open reconciliation case.
    const { actions, attemptIds } = await endedActions(stopped, statuses.length);
    const claimers = await withSeeder((_s, db) =>
      db.prisma.dispatchClaim.findMany({ where: { actionId: { in: actions.map((a) => a.id) } }, select: { claimedBy: true } }),
    );
    // both instances claimed some: the stop fell inside the traffic
    expect(new Set(claimers.map((c) => c.claimedBy))).toEqual(new Set([stackInstance, dispatch2.instanceId]));

    // What reached the provider: at most one attempt per action (no hedging here), one request per
    // attempt, and none that is not an attempt of this traffic.
    for (const a of actions) expect(a.attempts.length).toBeLessThanOrEqual(1);
    const upstream = (await simRequestsSince(fromSeq)).map((r) => r.clientRequestId);
    const ours = new Set(attemptIds);
    expect(upstream.filter((id) => !id || !ours.has(id))).toEqual([]);
    expect(upstream.length).toBe(new Set(upstream).size);
    // The continued instance went on with commands it had in hand, which the group had meanwhile
    // handed to the other instance (the broker answered its pending fetch while it was stopped):
    // each was refused by its claim, so the case above did test what a stopped instance does.
    const metrics = await (await fetch(`${dispatch2.url}/metrics`)).text();
    const refused = [
      ...metrics.matchAll(/^gateway_dispatch_refused_total\{[^}]*reason="(?:already_claimed|not_dispatchable)"[^}]*\} (\d+)$/gm),
    ];
    expect(refused.reduce((n, m) => n + Number(m[1]), 0)).toBeGreaterThan(0);

    // The continued instance is a member again, with partitions of its own.
    await eventually(
      async () => {
        const members = await stableMembers(DISPATCH_GROUP, Topics.dispatchCommands.name);
        return (members?.get(dispatch2.instanceId) ?? 0) > 0 ? true : undefined;
      },
      { timeoutMs: 30000, what: 'the continued dispatch instance holding partitions again' },
    );
  }, 150_000);

  it('a dispatch instance killed mid-traffic: every admitted action ends with one ledger row per attempt or a reconciliation case', async () => {
    const admissions = [stack.admission, admission2.url];
    const pending = Array.from({ length: 12 }, (_, i) =>
      openai(key, 'current', { admission: admissions[i % 2] })
        .chat.completions.create({ model: slow, messages: [{ role: 'user', content: `mid-traffic ${i}` }] }, { maxRetries: 0 })
        .then(
          () => 200,
          (e: { status?: number }) => e.status ?? 0,
        ),
    );
    // Kill once the doomed instance has an attempt in flight upstream.
    await untilInFlightOnSecondDispatch(slow);
    dispatch2.child.kill('SIGKILL');

    // Every client gets an answer or the stable deadline error (which one depends on timing); none is left hanging.
    const statuses = await Promise.all(pending);
    for (const s of statuses) expect([200, 504]).toContain(s);

    // Every admitted action ends: no reservation of the workload stays pending, and each attempt has
    // exactly one ledger row, or none and an open reconciliation case (the one the killed instance held).
    const { actions, cases } = await endedActions(slow, statuses.length);
    // The attempt in flight on the killed instance is one of those cases: its exposure is held, never silently zero.
    expect(cases.map((c) => c.reason)).toContain('orphaned_attempt');
    // An action with no attempt never reached a dispatcher in time: its reservation was voided.
    for (const a of actions.filter((x) => x.attempts.length === 0)) expect(a.reservation?.status).toBe('voided');
  }, 120_000);
});
