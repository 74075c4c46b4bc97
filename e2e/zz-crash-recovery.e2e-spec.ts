import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { APIError } from 'openai';
import { actionStatus } from './actions';
import { eventually, openai, simLastSeq, simRequestsSince, stack, uid, withSeeder } from './support';

/**
 * DESIGN §9: any service can be killed at any instant. Dispatch is killed (SIGKILL) while an
 * upstream call is in flight and a replacement is started: the app gets a stable 504, the attempt
 * is not sent again, its exposure is held as unresolved (never zero) by reconciliation, and the
 * replacement serves the next request.
 */
describe('crash recovery: dispatch killed mid-attempt', () => {
  const run = uid();
  const slow = `crash-slow-${run}`;
  const fast = `crash-fast-${run}`;
  let key: string;
  let afterKey: string;
  const dispatchPid = Number(process.env.E2E_DISPATCH_PID);
  const dispatchPort = Number(process.env.DISPATCH_PORT ?? 13002);

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
      // The replacement joins the consumer group only after the killed member's session times
      // out, so the request after the crash gets a roomier deadline.
      afterKey = (await seed.workload({ id: `crash-after-${run}`, allowedAliases: [fast], deadlineMs: 30000 })).key;
      return (await seed.workload({ id: `crash-${run}`, allowedAliases: [slow, fast], deadlineMs: 4000 })).key;
    });
  });

  it('holds the exposure, never re-sends, and recovers with a replacement dispatcher', async () => {
    expect(dispatchPid).toBeGreaterThan(0);
    const before = await simLastSeq();
    const client = openai(key).withOptions({ maxRetries: 0 });
    const pending = client.chat.completions
      .create({ model: slow, messages: [{ role: 'user', content: 'slow one' }] })
      .catch((e: unknown) => e);

    // Wait until the attempt is in flight upstream, then kill the dispatcher without warning.
    const actionId = await eventually(
      async () => {
        const rows = await withSeeder((_s, db) =>
          db.prisma.attempt.findMany({ where: { routeId: slow, status: 'in_flight' }, select: { actionId: true } }),
        );
        return rows[0]?.actionId;
      },
      { what: 'attempt in flight' },
    );
    process.kill(dispatchPid, 'SIGKILL');

    const replacement = spawn(process.execPath, ['-r', '@swc-node/register', 'apps/dispatch/src/main.ts'], {
      cwd: path.resolve(__dirname, '..'),
      env: process.env,
      stdio: [
        'ignore',
        fs.openSync(path.join(stack.logDir, 'dispatch-replacement.log'), 'a'),
        fs.openSync(path.join(stack.logDir, 'dispatch-replacement.log'), 'a'),
      ],
      detached: true,
    });
    replacement.unref();
    fs.writeFileSync(path.join(stack.logDir, 'dispatch.replacement.pid'), String(replacement.pid));
    await eventually(async () => ((await fetch(`http://127.0.0.1:${dispatchPort}/health`)).ok ? true : undefined), {
      timeoutMs: 45000,
      what: 'replacement dispatch healthy',
    });

    const err = (await pending) as APIError;
    expect(err).toBeInstanceOf(APIError);
    expect(err.status).toBe(504);
    expect(err.code).toBe('deadline_exceeded');

    // Reconciliation finds the orphaned attempt: exposure held as unresolved, a case opened.
    const status = await eventually(
      async () => {
        const s = await actionStatus(key, actionId);
        return s.open_reconciliation_cases.length > 0 ? s : undefined;
      },
      { timeoutMs: 30000, what: 'orphaned attempt reconciled' },
    );
    expect(status.open_reconciliation_cases.map((c: any) => c.reason)).toEqual(['orphaned_attempt']);
    expect(status.reservation_status).toBe('unresolved');
    expect(status.money_microusd.unresolved).toBe(status.money_microusd.reserved);
    expect(status.money_microusd.settled).toBe('0');
    expect(status.attempts).toHaveLength(1);

    // The command was redelivered to the replacement or not at all: either way it was sent once.
    const sent = (await simRequestsSince(before)).filter((r) => r.directives.includes('latency=3000'));
    expect(sent).toHaveLength(1);

    // The replacement serves new work.
    const ok = await openai(afterKey)
      .withOptions({ maxRetries: 0 })
      .chat.completions.create({ model: fast, messages: [{ role: 'user', content: 'after the crash' }] });
    expect(ok.choices).toHaveLength(1);
  });
});
