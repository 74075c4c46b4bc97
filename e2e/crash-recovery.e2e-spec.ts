import { ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Admin, AssignerProtocol, Kafka, logLevel } from 'kafkajs';
import { APIError } from 'openai';
import { Topics } from '@gateway/contracts';
import { actionStatus } from './actions';
import { eventually, openai, serviceArgs, simLastSeq, simRequestsSince, stack, TopicReader, uid, withSeeder } from './support';

/** The consumer group every dispatch instance joins (apps/dispatch/src/consumers/dispatch-commands.consumer.ts). */
const DISPATCH_GROUP = 'gateway-dispatch';

/**
 * DESIGN §9: any service can be killed at any instant. The test starts a dispatch instance of its
 * own next to the stack's, waits until an attempt is in flight upstream on it, and kills it
 * (SIGKILL): the app gets a stable 504, the attempt is not sent again, its exposure is held as
 * unresolved (never zero) by reconciliation, and the stack's dispatch, which takes over the dead
 * member's partitions, serves the next request. The shared dispatch is never touched, so this
 * suite may run in any order.
 */
describe('crash recovery: a dispatch instance killed mid-attempt', () => {
  const run = uid();
  const slow = `crash-slow-${run}`;
  const fast = `crash-fast-${run}`;
  const instanceId = `e2e-crash-dispatch-${run}`;
  const port = Number(process.env.DISPATCH_PORT ?? 13002) + 20;
  let key: string;
  let afterKey: string;
  let victim: ChildProcess | undefined;
  let admin: Admin;
  const commands = new TopicReader([Topics.dispatchCommands.name]);

  /** The dispatch-command partitions the consumer group currently gives our instance, once the group is stable. */
  const ourPartitions = async (): Promise<number[] | undefined> => {
    const { groups } = await admin.describeGroups([DISPATCH_GROUP]);
    const group = groups[0];
    if (group?.state !== 'Stable') return undefined;
    const member = group.members.find((m) => m.clientId === instanceId);
    if (!member) return undefined;
    const assigned = AssignerProtocol.MemberAssignment.decode(member.memberAssignment)?.assignment[Topics.dispatchCommands.name];
    return assigned && assigned.length > 0 ? assigned : undefined;
  };

  beforeAll(async () => {
    key = await withSeeder(async (seed) => {
      await seed.route({
        routeId: slow,
        alias: slow,
        providerKind: 'openai-chat',
        upstreamBaseUrl: stack.providerSim,
        upstreamModel: 'sim-gpt;latency=3000',
      });
      await seed.route({
        routeId: fast,
        alias: fast,
        providerKind: 'openai-chat',
        upstreamBaseUrl: stack.providerSim,
        upstreamModel: 'sim-gpt',
      });
      // The killed member's partitions move to the stack's dispatch only after its session times
      // out, so the request after the crash gets a roomier deadline.
      afterKey = (await seed.workload({ id: `crash-after-${run}`, allowedAliases: [fast], deadlineMs: 30000 })).key;
      return (await seed.workload({ id: `crash-${run}`, allowedAliases: [slow, fast], deadlineMs: 4000 })).key;
    });
    const kafka = new Kafka({ clientId: `e2e-admin-${run}`, brokers: stack.brokers, logLevel: logLevel.NOTHING });
    admin = kafka.admin();
    await admin.connect();
    await commands.start();

    const logFile = path.join(stack.logDir, `dispatch-${instanceId}.log`);
    victim = spawn(process.execPath, serviceArgs('dispatch'), {
      cwd: path.resolve(__dirname, '..'),
      env: { ...process.env, GATEWAY_INSTANCE_ID: instanceId, DISPATCH_PORT: String(port) },
      stdio: ['ignore', fs.openSync(logFile, 'a'), fs.openSync(logFile, 'a')],
    });
    await eventually(async () => ((await fetch(`http://127.0.0.1:${port}/health`)).ok ? true : undefined), {
      timeoutMs: 45000,
      what: 'our dispatch instance healthy',
    });
  }, 90_000);

  afterAll(async () => {
    if (victim && victim.exitCode === null && victim.signalCode === null) victim.kill('SIGKILL');
    await commands.stop();
    await admin.disconnect();
  });

  it('holds the exposure, never re-sends, and the remaining dispatcher serves on', async () => {
    const ours = await eventually(ourPartitions, { timeoutMs: 30000, what: 'our instance holding dispatch-command partitions' });
    const client = openai(key).withOptions({ maxRetries: 0 });
    const before = await simLastSeq();

    // Admission picks the action id, so its partition is chance: send slow requests one at a time
    // until one is in flight upstream on our instance (each lands there with probability ~ 1/2).
    let target: { actionId: string; pending: Promise<unknown> } | undefined;
    const others: Array<Promise<unknown>> = [];
    for (let i = 0; i < 12 && !target; i++) {
      const since = commands.messages.length;
      const pending = client.chat.completions
        .create({ model: slow, messages: [{ role: 'user', content: `slow ${i}` }] })
        .catch((e: unknown) => e);
      const { actionId, partition } = await eventually(
        async () => {
          const rows = await withSeeder((_s, db) =>
            db.prisma.attempt.findMany({ where: { routeId: slow, status: 'in_flight' }, select: { actionId: true } }),
          );
          const sent = commands.messages.slice(since).find((m) => rows.some((r) => r.actionId === m.key));
          return sent ? { actionId: sent.key as string, partition: sent.partition } : undefined;
        },
        { what: 'a slow attempt in flight' },
      );
      // "In flight" is written just before the upstream call: kill only once the sim has it.
      await eventually(
        async () => ((await simRequestsSince(before)).filter((r) => r.directives.includes('latency=3000')).length > i ? true : undefined),
        { what: 'the slow request received upstream' },
      );
      if (ours.includes(partition)) target = { actionId, pending };
      else others.push(pending);
    }
    if (!target) throw new Error(`no slow request landed on partitions ${ours.join(',')} of our instance`);
    victim?.kill('SIGKILL');

    const err = (await target.pending) as APIError;
    expect(err).toBeInstanceOf(APIError);
    expect(err.status).toBe(504);
    expect(err.code).toBe('deadline_exceeded');

    // Reconciliation finds the orphaned attempt: exposure held as unresolved, a case opened.
    const status = await eventually(
      async () => {
        const s = await actionStatus(key, target.actionId);
        return s.open_reconciliation_cases.length > 0 ? s : undefined;
      },
      { timeoutMs: 30000, what: 'orphaned attempt reconciled' },
    );
    expect(status.open_reconciliation_cases.map((c: any) => c.reason)).toEqual(['orphaned_attempt']);
    expect(status.reservation_status).toBe('unresolved');
    expect(status.money_microusd.unresolved).toBe(status.money_microusd.reserved);
    expect(status.money_microusd.settled).toBe('0');
    expect(status.attempts).toHaveLength(1);

    // The slow requests served by the stack's dispatch were answered.
    for (const other of others) expect(await other).toMatchObject({ choices: [expect.anything()] });

    // Every slow command was sent upstream once: the killed one's redelivery (if any) found its claim.
    const sent = (await simRequestsSince(before)).filter((r) => r.directives.includes('latency=3000'));
    expect(sent).toHaveLength(others.length + 1);

    // The stack's dispatch takes over the dead member's partitions and serves new work on them.
    await eventually(
      async () => {
        const { groups } = await admin.describeGroups([DISPATCH_GROUP]);
        return groups[0]?.state === 'Stable' && !groups[0].members.some((m) => m.clientId === instanceId) ? true : undefined;
      },
      { timeoutMs: 30000, what: 'the killed instance gone from the dispatch group' },
    );
    const ok = await openai(afterKey)
      .withOptions({ maxRetries: 0 })
      .chat.completions.create({ model: fast, messages: [{ role: 'user', content: 'after the crash' }] });
    expect(ok.choices).toHaveLength(1);
  });
});
