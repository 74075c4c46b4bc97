/**
 * `npm run bench:replies`: what one receiver instance spends on the dispatch replies topic
 * (issue 12, "Replies addressed per receiver" in docs/decisions.md). Against a broker of its own,
 * this process publishes REPLIES replies at RATE/s, addressed round-robin to K receiver instances
 * (`<case>-1` … `<case>-K`, as dispatch addresses them) while one receiver, `<case>-1`, runs in a
 * child process of its own with the real intake (decrypt and parse what is its own) and reports
 * its CPU from joining to its last reply:
 *   broadcast  as before: every partition, each envelope parsed, then dropped unless its own
 *   addressed  now: its own partition only (partitions-only assigner), others skipped by header
 *   gone       addressed, but nobody waits for its own replies any more (a stream whose client
 *              left): each is dropped before it is decrypted
 * In the first two every own reply has a waiter, so it is decrypted and parsed, as in the stack.
 * K = 0 is policy's case: a receiver none of the replies are for. Modes alternate in one run.
 * Nothing is asserted: compare the modes of one run, not numbers across machines.
 * Knobs: BENCH_REPLIES (replies per measurement, default 3000), BENCH_REPLIES_RATE (replies/s
 * published, default 200), BENCH_REPLIES_ROUNDS (default 2), BENCH_REPLIES_K (comma-separated
 * receiver counts, default 0,1,2,4).
 */
import { ChildProcess, fork } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { addressTo, RECIPIENT_HEADER } from '@gateway/contracts';
import { ContentCipher, KafkaBus, ReplyRouter } from '@gateway/messaging';
import { DispatchRepliesIntake, ServiceConfig } from '@gateway/service-kit';
import { responseReply } from '@gateway/testing';

const num = (name: string, fallback: number) => Number(process.env[name] || fallback);
const REPLIES = num('BENCH_REPLIES', 3000);
const RATE = num('BENCH_REPLIES_RATE', 200);
const ROUNDS = num('BENCH_REPLIES_ROUNDS', 2);
const KS = (process.env.BENCH_REPLIES_K || '0,1,2,4').split(',').map(Number);
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
type Mode = 'broadcast' | 'addressed' | 'gone';

/** A receiver with a waiter for every reply (the normal case: its clients are still there). */
class WaitsForEveryReply extends ReplyRouter {
  override wants(): boolean {
    return true;
  }
}

/** A reply of the size of a short chat completion (the body is what admission decrypts). */
const REPLY = responseReply({ id: 'chatcmpl-bench', choices: [{ index: 0, message: { role: 'assistant', content: 'x'.repeat(1200) } }] });

/** The child: one receiver instance. Reports its CPU from ready to its `expected`-th handled reply. */
async function receiver(brokers: string, id: string, mode: Mode, expected: number, key: Buffer): Promise<void> {
  const bus = new KafkaBus({ brokers: [brokers], clientId: `bench-replies-${id}`, logger: quiet });
  const config = { instanceId: id } as ServiceConfig;
  const router = mode === 'gone' ? new ReplyRouter() : new WaitsForEveryReply();
  const intake = new DispatchRepliesIntake(router, new ContentCipher(key), config);
  let handled = 0;
  let cpu0 = process.cpuUsage();
  const done = new Promise<void>((resolve) => {
    void bus
      .subscribe(
        'dispatchReplies',
        {
          groupId: `bench-replies-${id}-${mode}`,
          fromBeginning: false,
          concurrency: mode === 'broadcast' ? 6 : 1,
          recipient:
            mode !== 'broadcast' ? { id, partitions: [addressTo('dispatchReplies', id).partition], header: RECIPIENT_HEADER } : undefined,
        },
        async (envelope) => {
          await intake.accept(envelope);
          if (++handled === expected) resolve();
        },
      )
      .then(() => {
        cpu0 = process.cpuUsage();
        process.send?.({ ready: true });
      });
  });
  await done;
  const cpu = process.cpuUsage(cpu0);
  process.send?.({ cpuMs: (cpu.user + cpu.system) / 1000, handled });
  await bus.disconnect();
}

function message(child: ChildProcess, key: string): Promise<Record<string, number | boolean>> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: Record<string, number | boolean>) => {
      if (key in m) {
        child.off('message', onMessage);
        resolve(m);
      }
    };
    child.on('message', onMessage);
    child.once('exit', (code) => reject(new Error(`receiver exited with ${code}`)));
  });
}

async function measure(bus: KafkaBus, cipher: ContentCipher, key: Buffer, k: number, mode: Mode) {
  const run = randomUUID().slice(0, 6);
  const ids = k === 0 ? [`bench${run}-x-1`] : Array.from({ length: k }, (_, i) => `bench${run}-${i + 1}`);
  const me = k === 0 ? `bench${run}-policy-1` : ids[0];
  const mine = k === 0 ? 0 : Math.ceil(REPLIES / k);
  // What the receiver's handler sees: everything (broadcast), or its own partition's replies.
  const expected = mode === 'broadcast' ? REPLIES : mine;
  const child = fork(__filename, ['receiver', process.env.KAFKA_BROKERS!, me, mode, String(expected), key.toString('hex')], {
    execArgv: ['-r', '@swc-node/register'],
  });
  await message(child, 'ready');
  // Open loop at RATE replies/s, as dispatch answers: the receiver's fetches come back with a few
  // records each, as in the stack, not with the large batches of a pre-filled topic.
  const sends: Array<Promise<void>> = [];
  const started = performance.now();
  for (let i = 0; i < REPLIES;) {
    const due = Math.min(REPLIES, Math.floor(((performance.now() - started) / 1000) * RATE));
    for (; i < due; i++) {
      const to = ids[i % ids.length];
      const actionId = randomUUID();
      const value = { event_id: randomUUID(), action_id: actionId, reply_to: to, body: cipher.encrypt(REPLY, actionId) };
      sends.push(bus.publish('dispatchReplies', [{ key: actionId, value, ...addressTo('dispatchReplies', to) }]));
    }
    await sleep(5);
  }
  await Promise.all(sends);
  const result = await message(child, 'cpuMs');
  child.kill('SIGTERM');
  return {
    k,
    mode,
    replies: REPLIES,
    own: mine,
    /** envelopes the receiver parsed (the others were not fetched, or were skipped by header) */
    parsed: Number(result.handled),
    cpuMs: Number(result.cpuMs),
    cpuMsPer1000Replies: (Number(result.cpuMs) * 1000) / REPLIES,
  };
}

async function main() {
  const brokers = process.env.KAFKA_BROKERS;
  if (!brokers) throw new Error('run through `npm run bench:replies` (a broker of its own)');
  const key = randomBytes(32);
  const cipher = new ContentCipher(key);
  const bus = new KafkaBus({ brokers: [brokers], clientId: 'bench-replies', logger: quiet });
  await bus.ensureTopics();
  const results: Array<Awaited<ReturnType<typeof measure>>> = [];
  for (let round = 0; round < ROUNDS; round++) {
    for (const k of KS) {
      for (const mode of ['broadcast', 'addressed', 'gone'] as const) {
        if (k === 0 && mode !== 'broadcast') continue; // policy now reads the probe topic only: none of these
        const r = await measure(bus, cipher, key, k, mode);
        results.push(r);
        console.log(JSON.stringify(r));
      }
    }
  }
  await bus.disconnect();
  console.log(`\n${REPLIES} replies at ${RATE}/s per measurement, ${ROUNDS} rounds, receiver \`<run>-1\` of K`);
  console.log('per 1,000 replies on the topic: envelopes parsed, receiver CPU ms mean (lowest round; load only adds)');
  console.log('receivers K  own share  broadcast parsed / CPU  addressed parsed / CPU  gone clients parsed / CPU');
  for (const k of KS) {
    const cell = (mode: Mode) => {
      const rs = results.filter((r) => r.k === k && r.mode === mode);
      if (rs.length === 0) return '—';
      const cpu = rs.map((r) => r.cpuMsPer1000Replies);
      const parsed = (rs[0].parsed * 1000) / rs[0].replies;
      return `${parsed.toFixed(0)} / ${(cpu.reduce((a, b) => a + b, 0) / cpu.length).toFixed(0)} (${Math.min(...cpu).toFixed(0)})`;
    };
    console.log(
      `${String(k).padStart(11)}  ${(k ? `1/${k}` : 'none').padStart(9)}  ${cell('broadcast').padStart(22)}  ${cell('addressed').padStart(22)}  ${cell('gone').padStart(25)}`,
    );
  }
}

if (process.argv[2] === 'receiver') {
  const [, , , brokers, id, mode, expected, key] = process.argv;
  receiver(brokers, id, mode as Mode, Number(expected), Buffer.from(key, 'hex')).then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
} else {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
