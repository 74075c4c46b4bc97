/**
 * Issue 14 (billable usage detail): what the provider reports it billed beyond the token totals
 * (cache writes, audio and image tokens, the service tier, per-call tool and grounding fees)
 * reaches the `attempt.completed` event and the attempt row. A request runs through dispatch's
 * RunAttempt against the provider simulator, whole and streamed, for each provider dialect; the
 * evidence is read back from Postgres (the event as written to the outbox).
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { createInterface } from 'node:readline';
import pino from 'pino';
import { Agent } from 'undici';
import { AttemptCompletedV1, DispatchCommandV1, TopicKey, TopicPayload, Topics } from '@gateway/contracts';
import { Database, DispatchRepository, HedgePolicyRepository, OutboxRepository } from '@gateway/db';
import { ContentCipher } from '@gateway/messaging';
import { UpstreamCredentials } from '@gateway/providers';
import { Metrics, randomIds, ServiceConfig, systemClock } from '@gateway/service-kit';
import { insertAdmittedAction } from '@gateway/testing';
import { DispatchMetrics } from '../src/dispatch.metrics';
import { dispatchCommand } from '../src/usecases/run-attempt/dispatch-command.fixture';
import type { ReplyPublisher } from '../src/usecases/run-attempt/ports';
import { RunAttempt } from '../src/usecases/run-attempt/run-attempt.usecase';

const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';
const CONFIG: ServiceConfig = {
  serviceName: 'dispatch',
  instanceId: 'dispatch-billable',
  databaseUrl: url,
  kafkaBrokers: [],
  logLevel: 'silent',
  host: '127.0.0.1',
};

const ROOT = path.resolve(__dirname, '../../..');

/**
 * The provider simulator as its own process, as the stack runs it (an app is not imported by
 * another app): a free port, the URL read from its start-up log line.
 */
async function startSim(): Promise<{ url: string; stop(): Promise<void> }> {
  const child = spawn(process.execPath, ['-r', '@swc-node/register', 'apps/provider-sim/src/main.ts'], {
    cwd: ROOT,
    env: { ...process.env, PROVIDER_SIM_PORT: '0', PROVIDER_SIM_SEED: '11', SWC_NODE_PROJECT: path.join(ROOT, 'tsconfig.json') },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (line) => {
      const started = /"url":"([^"]+)"/.exec(line);
      if (started) resolve(started[1]);
    });
    void exited.then(() => reject(new Error('provider-sim exited before listening')));
  });
  return {
    url,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Replies go to the admission instance over Kafka; here they are only checked against their schema. */
class SchemaCheckedReplies implements ReplyPublisher {
  async publish<K extends TopicKey>(topic: K, messages: Array<{ key: string; value: TopicPayload<K> }>): Promise<void> {
    for (const m of messages) Topics[topic].schema.parse(m.value);
  }
}

interface Case {
  name: string;
  api: DispatchCommandV1['api_kind'];
  model: string;
  stream: boolean;
  request: Record<string, unknown>;
  expected: Partial<AttemptCompletedV1>;
}

const chat = { messages: [{ role: 'user', content: 'hi' }] };
const audio = { modalities: ['text', 'audio'], audio: { voice: 'alloy', format: 'wav' } };

const CASES: Case[] = [
  {
    name: 'chat: audio in and out, a cache write, the priority tier asked, one web search',
    api: 'openai-chat',
    model: 'sim-gpt;words=3;audio-out=9;audio-in=1;cache-write=2',
    stream: false,
    request: { ...chat, ...audio, service_tier: 'priority', web_search_options: {} },
    expected: {
      input_tokens: 4,
      output_tokens_total: 12,
      cache_write_input_tokens: 2,
      audio_input_tokens: 1,
      audio_output_tokens: 9,
      image_output_tokens: 0,
      service_tier: 'priority',
      feature_calls: { web_search: 1 },
    },
  },
  {
    name: 'chat stream: the tier the chunks report (not the one asked), audio from the usage chunk',
    api: 'openai-chat',
    model: 'sim-gpt;words=3;audio-out=5;tier=flex',
    stream: true,
    request: { ...chat, ...audio, service_tier: 'priority' },
    expected: { output_tokens_total: 8, audio_output_tokens: 5, service_tier: 'flex', feature_calls: {} },
  },
  {
    name: 'responses: one web search per web_search_call item, one file search; auto is billed as default',
    api: 'openai-responses',
    model: 'sim-gpt;searches=2',
    stream: false,
    request: { input: 'hi', tools: [{ type: 'web_search' }, { type: 'file_search', vector_store_ids: ['vs_1'] }], service_tier: 'auto' },
    expected: { service_tier: 'default', feature_calls: { web_search: 2, file_search: 1 }, cache_write_input_tokens: 0 },
  },
  {
    name: 'responses stream: the calls of the terminal event',
    api: 'openai-responses',
    model: 'sim-gpt;searches=3',
    stream: true,
    request: { input: 'hi', tools: [{ type: 'web_search_preview' }, { type: 'code_interpreter', container: { type: 'auto' } }] },
    expected: { service_tier: 'default', feature_calls: { web_search: 3, code_execution: 1 } },
  },
  {
    name: 'gemini 2.x: image output, search grounding once per grounded prompt whatever the queries',
    api: 'gemini-generate',
    model: 'gemini-2.5-flash;words=3;image-out=20;searches=3',
    stream: false,
    request: {
      contents: [{ role: 'user', parts: [{ text: 'draw it' }] }],
      generationConfig: { responseModalities: ['TEXT', 'IMAGE'] },
      tools: [{ googleSearch: {} }],
    },
    expected: { output_tokens_total: 23, image_output_tokens: 20, service_tier: 'default', feature_calls: { search_grounding: 1 } },
  },
  {
    name: 'gemini stream (per-query model): audio out, search grounding per query, maps grounding',
    api: 'gemini-generate',
    model: 'gemini-sim;words=3;audio-out=7;audio-in=2;searches=2',
    stream: true,
    request: {
      contents: [{ role: 'user', parts: [{ text: 'read it out' }] }],
      generationConfig: { responseModalities: ['AUDIO'] },
      tools: [{ googleSearch: {} }, { googleMaps: {} }],
    },
    expected: {
      audio_input_tokens: 2,
      audio_output_tokens: 7,
      service_tier: 'default',
      feature_calls: { search_grounding: 2, maps_grounding: 1 },
    },
  },
];

describe('billable usage detail from provider to attempt.completed', () => {
  const db = new Database(url, { poolMax: 4 });
  const repo = new DispatchRepository(db, new OutboxRepository(db));
  const upstream = new Agent();
  let sim: { url: string; stop(): Promise<void> };
  let run: RunAttempt;

  beforeAll(async () => {
    sim = await startSim();
    run = new RunAttempt(
      repo,
      new SchemaCheckedReplies(),
      new ContentCipher(Buffer.alloc(32, 3)),
      new DispatchMetrics(new Metrics('billable')),
      upstream,
      CONFIG,
      pino({ level: 'silent' }),
      systemClock,
      randomIds,
      new UpstreamCredentials({}),
      new HedgePolicyRepository(db, new OutboxRepository(db)),
    );
  });
  afterAll(async () => {
    await sim.stop();
    await upstream.close();
    await db.close();
  });

  it.each(CASES)('$name', async ({ api, model, stream, request, expected }) => {
    const workloadId = `billable-${randomUUID()}`;
    const deadline = new Date(Date.now() + 30_000);
    const actionId = await insertAdmittedAction(db, { workloadId, deadline });
    const kind = api === 'gemini-generate' ? 'gemini-generate' : 'openai-chat';
    const base = dispatchCommand({}, kind);
    const cmd: DispatchCommandV1 = {
      ...base,
      action_id: actionId,
      workload_id: workloadId,
      api_kind: api,
      stream,
      route: { ...base.route, base_url: sim.url, upstream_model: model },
      requested_candidates: null,
      effective_candidates: 1,
      output_ceiling: 200,
      deadline: deadline.toISOString(),
      dispatch_deadline: deadline.toISOString(),
      request,
    };
    const { done } = await run.execute(cmd, { instanceId: 'admission-billable', topic: 'dispatchReplies' });
    await done;

    const row = await db.prisma.outboxMessage.findFirstOrThrow({ where: { key: workloadId, topic: Topics.attemptCompleted.name } });
    const event = Topics.attemptCompleted.schema.parse(row.payload);
    expect(event).toMatchObject({ outcome: 'succeeded', usage_source: stream ? 'stream_final_chunk' : 'provider_response', ...expected });
    expect(event.usage_unknown_fields).toBeUndefined();

    const attempt = await db.prisma.attempt.findFirstOrThrow({ where: { actionId } });
    expect(attempt).toMatchObject({
      status: 'succeeded',
      cacheWriteInputTokens: event.cache_write_input_tokens,
      audioInputTokens: event.audio_input_tokens,
      audioOutputTokens: event.audio_output_tokens,
      imageOutputTokens: event.image_output_tokens,
      serviceTier: event.service_tier,
      featureCalls: event.feature_calls,
    });
  });
});
