// POST /v1/responses in the OpenAI Responses API shape: one answer per request, `max_output_tokens`
// as the cap, usage in the response object (and in the stream's `response.completed` event).
import { sendJson } from './http';
import { InvalidRequest, optionalCount, sendStream, type Exchange, type PlanSource, type ProviderAdapter } from './exchange';
import { reportedTier, responsesHostedTools } from './billing-detail';
import { openAiChat } from './openai.handler';
import { planResponse, type SimCandidate, type SimPlan } from './simulate';
import { estimatePromptTokens } from './text';

/** Fields of other OpenAI endpoints the Responses API refuses (as OpenAI does: unknown parameter). */
const FOREIGN_FIELDS = ['n', 'max_tokens', 'max_completion_tokens', 'messages'];

/** Text of one input item's content (a string, or `input_text` parts). */
function itemText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((part) => (typeof part?.text === 'string' ? part.text : '')).join('');
}

function inputTexts(input: unknown): string[] {
  if (typeof input === 'string') return [input];
  return Array.isArray(input) ? input.map((item) => itemText(item?.content ?? item?.output)) : [];
}

export function responsesUsage(plan: SimPlan) {
  const output = plan.outputTokens + plan.reasoningTokens;
  return {
    input_tokens: plan.promptTokens,
    input_tokens_details: { cached_tokens: plan.cachedTokens },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: plan.reasoningTokens },
    total_tokens: plan.promptTokens + output,
  };
}

function statusOf(c: SimCandidate | undefined): { status: string; incomplete_details: { reason: string } | null } {
  if (c?.finish === 'length') return { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } };
  if (c?.finish === 'filter') return { status: 'incomplete', incomplete_details: { reason: 'content_filter' } };
  return { status: 'completed', incomplete_details: null };
}

/** A hosted tool's output item as OpenAI shapes it; the sim's queries and code are placeholders. */
function hostedToolItem(type: string, id: string): Record<string, unknown> {
  switch (type) {
    case 'web_search_call':
      return { id: `ws_sim_${id}`, type, status: 'completed', action: { type: 'search', query: 'sim query' } };
    case 'file_search_call':
      return { id: `fs_sim_${id}`, type, status: 'completed', queries: ['sim query'], results: null };
    default:
      return { id: `ci_sim_${id}`, type, status: 'completed', code: 'print(1)', container_id: `cntr_sim_${id}`, outputs: null };
  }
}

export const openAiResponses: ProviderAdapter = {
  provider: 'openai',
  endpoint: 'openai.responses',
  errorBody: openAiChat.errorBody,

  parse(body: unknown) {
    if (!body || typeof body !== 'object' || Array.isArray(body)) throw new InvalidRequest('The request body must be a JSON object.');
    const b = body as Record<string, unknown>;
    if (typeof b.model !== 'string' || !b.model) throw new InvalidRequest('you must provide a model parameter', { param: 'model' });
    for (const f of FOREIGN_FIELDS) {
      if (f in b) throw new InvalidRequest(`Unsupported parameter: '${f}'.`, { param: f, code: 'unsupported_parameter' });
    }
    if (typeof b.input !== 'string' && !Array.isArray(b.input)) {
      throw new InvalidRequest("Missing required parameter: 'input'.", { param: 'input', code: 'missing_required_parameter' });
    }
    const cap = optionalCount(
      b.max_output_tokens,
      'max_output_tokens',
      "Invalid 'max_output_tokens': expected an integer >= 1.",
      'invalid_value',
    );
    const texts = inputTexts(b.input);
    const instructions = typeof b.instructions === 'string' ? [b.instructions] : [];
    return {
      modelSpec: b.model,
      asked: null,
      cap,
      stream: b.stream === true,
      promptTokens: estimatePromptTokens([...instructions, ...texts].map((t) => t.length)),
      lastText: texts[texts.length - 1] ?? '',
    };
  },

  // One answer per request: `extra` has nothing to add to, `serve=0` leaves the output empty.
  plan(src: PlanSource) {
    const script = { ...src.resolved.script, extra: 0 };
    return planResponse({ ...src.parsed, asked: 1, seed: src.ctx.seed, fingerprint: src.fingerprint, script });
  },

  async respond(ex: Exchange) {
    const { script, model } = ex.resolved;
    const { parsed } = ex;
    if (script.block) {
      return ex.fail(400, 'Your request was rejected as a result of our safety system.', { code: 'content_policy_violation' });
    }
    const { plan } = ex;
    const answer = plan.candidates[0];
    const id = `resp_sim_${ex.id}`;
    const messageId = `msg_sim_${ex.id}`;
    const headers = { 'x-request-id': `req_sim_${ex.id}` };
    // the request id OpenAI's logs and the gateway's attempt record key on (the body id is per response)
    ex.entry.providerRequestId = headers['x-request-id'];
    const text = answer?.words.join(' ') ?? '';
    const reasoningItem = plan.reasoningTokens > 0 ? [{ id: `rs_sim_${ex.id}`, type: 'reasoning', summary: [] }] : [];
    // Hosted tools the request offers ran before the answer: `searches` web searches, one call of each other tool.
    const toolItems = responsesHostedTools(ex.body).flatMap((type) =>
      Array.from({ length: type === 'web_search_call' ? script.searches : 1 }, (_, k) => hostedToolItem(type, `${ex.id}_${k}`)),
    );
    const leadItems = [...reasoningItem, ...toolItems];
    const part = { type: 'output_text', annotations: [], logprobs: [], text };
    const finalStatus = statusOf(answer);
    const message = answer
      ? {
          id: messageId,
          type: 'message',
          status: finalStatus.status === 'completed' ? 'completed' : 'incomplete',
          role: 'assistant',
          content: answer.finish === 'filter' ? [] : [part],
        }
      : null;
    const response = (over: Record<string, unknown>) => ({
      id,
      object: 'response',
      created_at: Math.floor(Date.now() / 1000),
      status: 'in_progress',
      background: false,
      error: null,
      incomplete_details: null,
      instructions: typeof ex.body.instructions === 'string' ? ex.body.instructions : null,
      max_output_tokens: parsed.cap,
      model,
      output: [],
      parallel_tool_calls: true,
      previous_response_id: null,
      reasoning: { effort: null, summary: null },
      // echoes the request until the answer is done, as OpenAI does (`auto` included)
      service_tier: typeof ex.body.service_tier === 'string' ? ex.body.service_tier : 'default',
      store: ex.body.store ?? true,
      temperature: 1,
      text: { format: { type: 'text' } },
      tool_choice: 'auto',
      tools: [],
      top_p: 1,
      truncation: 'disabled',
      usage: null,
      user: null,
      metadata: {},
      ...over,
    });
    const final = response({
      ...finalStatus,
      service_tier: reportedTier(ex.body, script),
      output: [...leadItems, ...(message ? [message] : [])],
      usage: script.noUsage ? null : responsesUsage(plan),
    });

    if (!parsed.stream) return sendJson(ex.res, 200, final, headers);

    let seq = 0;
    const event = (type: string, fields: Record<string, unknown>) =>
      `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...fields })}\n\n`;
    const events = [event('response.created', { response: response({}) }), event('response.in_progress', { response: response({}) })];
    toolItems.forEach((item, k) => {
      const outputIndex = reasoningItem.length + k;
      events.push(event('response.output_item.added', { output_index: outputIndex, item: { ...item, status: 'in_progress' } }));
      events.push(event('response.output_item.done', { output_index: outputIndex, item }));
    });
    if (message && answer) {
      const outputIndex = leadItems.length;
      const at = { item_id: messageId, output_index: outputIndex, content_index: 0 };
      events.push(
        event('response.output_item.added', { output_index: outputIndex, item: { ...message, status: 'in_progress', content: [] } }),
      );
      if (answer.finish !== 'filter') {
        events.push(event('response.content_part.added', { ...at, part: { ...part, text: '' } }));
        answer.words.forEach((w, k) => events.push(event('response.output_text.delta', { ...at, delta: k ? ` ${w}` : w, logprobs: [] })));
        events.push(event('response.output_text.done', { ...at, text, logprobs: [] }));
        events.push(event('response.content_part.done', { ...at, part }));
      }
      events.push(event('response.output_item.done', { output_index: outputIndex, item: message }));
    }
    const terminal = finalStatus.status === 'completed' ? 'response.completed' : 'response.incomplete';
    await sendStream(ex, 'text/event-stream; charset=utf-8', events.join(''), event(terminal, { response: final }), headers);
  },
};
