// What a request asked the upstream to spend, as received: every spelling of the candidate count
// and the output cap (path → value), the price-changing fields present (paths only) and `store`.
// Independent of the gateway's own rules on purpose: the log is the witness of what arrived.
// Never prompt text: only these numbers, booleans and field names.

const CANDIDATE_KEYS = ['n', 'num_completions', 'candidateCount', 'candidate_count'];
const CAP_KEYS = ['max_tokens', 'max_completion_tokens', 'max_output_tokens', 'maxOutputTokens'];
const PRICED_TOP_LEVEL = ['service_tier', 'modalities', 'audio', 'web_search_options', 'prediction', 'models', 'plugins'];
const PRICED_CONFIG = ['responseModalities', 'response_modalities', 'speechConfig', 'speech_config'];
const PRICED_TOOLS = [
  'googleSearch',
  'google_search',
  'googleSearchRetrieval',
  'google_search_retrieval',
  'codeExecution',
  'code_execution',
  'urlContext',
  'url_context',
  'googleMaps',
  'google_maps',
];

/** Responses API hosted tools (`tools[i].type`) that bill beyond tokens. */
const PRICED_TOOL_TYPES = ['file_search', 'code_interpreter', 'image_generation', 'computer_use', 'computer_use_preview', 'mcp'];

export interface SpendFields {
  /** every candidate-count spelling received, by path (`n`, `generationConfig.candidateCount`, …) */
  candidateFields: Record<string, unknown>;
  /** every output-cap spelling received, by path */
  capFields: Record<string, unknown>;
  /** paths of price-changing fields received (names only) */
  pricedFields: string[];
  /** `store` as received; null when absent */
  store: unknown;
}

export function emptySpendFields(): SpendFields {
  return { candidateFields: {}, capFields: {}, pricedFields: [], store: null };
}

export function spendFieldsOf(body: unknown): SpendFields {
  const out = emptySpendFields();
  const b = record(body);
  if (!b) return out;
  const containers: [string, Record<string, unknown> | null][] = [
    ['', b],
    ['generationConfig.', record(b.generationConfig)],
    ['generation_config.', record(b.generation_config)],
  ];
  for (const [prefix, c] of containers) {
    if (!c) continue;
    for (const k of CANDIDATE_KEYS) if (k in c) out.candidateFields[prefix + k] = scalar(c[k]);
    for (const k of CAP_KEYS) if (k in c) out.capFields[prefix + k] = scalar(c[k]);
    for (const k of prefix ? PRICED_CONFIG : PRICED_TOP_LEVEL) if (c[k] !== undefined && c[k] !== null) out.pricedFields.push(prefix + k);
  }
  const tools = Array.isArray(b.tools) ? b.tools : [];
  tools.forEach((t, i) => {
    for (const k of Object.keys(record(t) ?? {})) if (PRICED_TOOLS.includes(k)) out.pricedFields.push(`tools[${i}].${k}`);
    const type = record(t)?.type;
    if (typeof type === 'string' && (type.startsWith('web_search') || PRICED_TOOL_TYPES.includes(type)))
      out.pricedFields.push(`tools[${i}].type`);
  });
  out.store = 'store' in b ? scalar(b.store) : null;
  return out;
}

/** Numbers, booleans and null as sent; anything else as its type name (never its content). */
function scalar(v: unknown): unknown {
  if (v === null || typeof v === 'number' || typeof v === 'boolean') return v;
  return `<${Array.isArray(v) ? 'array' : typeof v}>`;
}

function record(v: unknown): Record<string, unknown> | null {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
}
