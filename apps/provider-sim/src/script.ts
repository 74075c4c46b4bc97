// Scenario directives: `;`-separated segments after the base model name ("sim-gpt;latency=50-200;filter=1")
// and/or in the `x-sim-script` header with the same syntax (header wins on conflicts).

export interface SimScript {
  latency?: LatencyRange;
  /** Heavy tail: `perMille`‰ of requests draw their latency from this slow range instead of `latency`. */
  latencyTail?: LatencyRange & { perMille: number };
  ttft?: number;
  /** Streams: pause this long in the middle of the content. */
  stall?: number;
  serve?: number;
  filter: number[];
  block: boolean;
  noUsage: boolean;
  /** Usage under-reports a multi-candidate answer: it counts the first candidate only (a kept-answer ledger bug). */
  underUsage: boolean;
  cutStream: boolean;
  /** Streams: BOM, CRLF line endings, and the bytes written in pieces cut inside every multi-byte character and CRLF. */
  fragment: boolean;
  /** The answer repeats the last prompt text word for word (to send chosen, e.g. non-ASCII, text). */
  echo: boolean;
  /**
   * Gemini: the answer carries values no real provider sends, as a broken or hostile upstream
   * could: a responseId with a NUL and 3,000 characters long, and 40 unknown usage fields with
   * 150-character names (the gateway bounds both before they reach its evidence).
   */
  hostileFields: boolean;
  /** OpenAI chat, whole answers: a `sim_padding` field of this many bytes before the usage (an answer too large to read). */
  padBytes?: number;
  /**
   * OpenAI chat streams: every content chunk carries a `sim_padding` field of this many bytes (a
   * long stream in few events; at most 512 KiB, so a relayed chunk still fits one Kafka message).
   */
  padChunks?: number;
  extra: number;
  rejectN: boolean;
  reasoning: number;
  cached: number;
  /** Tokens of the prompt reported as written to the prompt cache (OpenAI-compatible `cache_write_tokens`). */
  cacheWrite: number;
  /** Tokens of the prompt reported as audio. */
  audioIn: number;
  /** Audio output tokens per candidate when the request asks for audio output (default DEFAULT_AUDIO_TOKENS). */
  audioOut?: number;
  /** Image output tokens per candidate when the request asks for image output (default DEFAULT_IMAGE_TOKENS). */
  imageOut?: number;
  /** Web searches the answer ran when the request offers a search tool (Gemini queries, Responses `web_search_call` items). */
  searches: number;
  /** The service tier the provider reports, whatever the request asked (a provider that served another tier). */
  tier?: string;
  words?: number;
  status?: number;
  failFirst: number;
  /**
   * `slow-first=<k>:<ms>`: the first k requests with the same body fingerprint wait `ms` instead of
   * their drawn delay (a slow primary whose hedge, the same body sent again, is fast).
   */
  slowFirst?: { count: number; ms: number };
  /**
   * `key-sha256=<hex>`: answer 401 unless the request carries an API key whose SHA-256 is this, in
   * the provider's own header (OpenAI `Authorization: Bearer`, Gemini `x-goog-api-key`). The
   * directive names a hash so the model name, which the gateway stores, never holds the key.
   */
  keySha256?: string;
}

/** Inclusive range of whole milliseconds. */
export interface LatencyRange {
  min: number;
  max: number;
}

export interface ResolvedScript {
  /** Model name without directives. */
  model: string;
  script: SimScript;
  /** Normalised directives (`name` or `name=value`), sorted by name. */
  directives: string[];
}

export class ScriptError extends Error {}

type Raw = Map<string, string | undefined>;

const FLAGS = new Set(['block', 'no-usage', 'under-usage', 'cut-stream', 'reject-n', 'fragment', 'echo', 'hostile-fields']);
const VALUED = new Set([
  'latency',
  'latency-tail',
  'ttft',
  'stall',
  'serve',
  'filter',
  'extra',
  'reasoning',
  'cached',
  'cache-write',
  'audio-in',
  'audio-out',
  'image-out',
  'searches',
  'tier',
  'words',
  'status',
  'fail-first',
  'slow-first',
  'key-sha256',
  'pad-bytes',
  'pad-chunks',
]);

/** Parses `a=1;b;c=2-3` into a map, rejecting unknown names and malformed segments. */
export function parseDirectives(spec: string): Raw {
  const out: Raw = new Map();
  for (const segment of spec.split(';')) {
    const text = segment.trim();
    if (!text) continue;
    const eq = text.indexOf('=');
    const name = (eq < 0 ? text : text.slice(0, eq)).trim().toLowerCase();
    const value = eq < 0 ? undefined : text.slice(eq + 1).trim();
    if (FLAGS.has(name)) {
      if (value !== undefined) throw new ScriptError(`sim directive '${name}' takes no value`);
    } else if (VALUED.has(name)) {
      if (!value) throw new ScriptError(`sim directive '${name}' needs a value`);
    } else {
      throw new ScriptError(`unknown sim directive '${name}'`);
    }
    out.set(name, value);
  }
  return out;
}

function int(name: string, value: string, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  if (!/^\d+$/.test(value)) throw new ScriptError(`sim directive '${name}' needs a non-negative integer, got '${value}'`);
  const n = Number(value);
  if (n < min || n > max) throw new ScriptError(`sim directive '${name}' must be between ${min} and ${max}`);
  return n;
}

/** `<ms>` or `<min>-<max>`. */
function range(name: string, value: string): LatencyRange {
  const [a, b = a, ...more] = value.split('-');
  if (more.length) throw new ScriptError(`sim directive '${name}' needs <ms> or <min>-<max>, got '${value}'`);
  const min = int(name, a);
  const max = int(name, b);
  if (max < min) throw new ScriptError(`sim directive '${name}' range is reversed`);
  return { min, max };
}

/** Builds a typed script from a raw directive map. */
export function toScript(raw: Raw): SimScript {
  const s: SimScript = {
    filter: [],
    block: false,
    noUsage: false,
    underUsage: false,
    cutStream: false,
    fragment: false,
    echo: false,
    hostileFields: false,
    extra: 0,
    rejectN: false,
    reasoning: 0,
    cached: 0,
    cacheWrite: 0,
    audioIn: 0,
    searches: 1,
    failFirst: 0,
  };
  for (const [name, v] of raw) {
    const value = v ?? '';
    switch (name) {
      case 'latency':
        s.latency = range(name, value);
        break;
      case 'latency-tail': {
        const m = /^(\d+):(.+)$/.exec(value);
        if (!m) throw new ScriptError(`sim directive 'latency-tail' needs <per_mille>:<min>-<max>, got '${value}'`);
        s.latencyTail = { perMille: int(name, m[1], 0, 1000), ...range(name, m[2]) };
        break;
      }
      case 'ttft':
        s.ttft = int(name, value);
        break;
      case 'stall':
        s.stall = int(name, value);
        break;
      case 'serve':
        s.serve = int(name, value);
        break;
      case 'filter':
        s.filter = value.split(',').map((i) => int(name, i.trim()));
        break;
      case 'extra':
        s.extra = int(name, value, 0, 128);
        break;
      case 'reasoning':
        s.reasoning = int(name, value);
        break;
      case 'cached':
        s.cached = int(name, value);
        break;
      case 'cache-write':
        s.cacheWrite = int(name, value);
        break;
      case 'audio-in':
        s.audioIn = int(name, value);
        break;
      case 'audio-out':
        s.audioOut = int(name, value);
        break;
      case 'image-out':
        s.imageOut = int(name, value);
        break;
      case 'searches':
        s.searches = int(name, value, 0, 16);
        break;
      case 'tier':
        if (!/^[a-z][a-z0-9_-]{0,31}$/.test(value)) throw new ScriptError(`sim directive 'tier' needs a tier name like 'flex'`);
        s.tier = value;
        break;
      case 'pad-bytes':
        s.padBytes = int(name, value, 1, 64 * 1024 * 1024);
        break;
      case 'pad-chunks':
        s.padChunks = int(name, value, 1, 512 * 1024);
        break;
      case 'words':
        s.words = int(name, value, 0, 10_000);
        break;
      case 'status':
        s.status = int(name, value, 400, 599);
        break;
      case 'fail-first':
        s.failFirst = int(name, value);
        break;
      case 'slow-first': {
        const m = /^(\d+):(\d+)$/.exec(value);
        if (!m) throw new ScriptError(`sim directive 'slow-first' needs <count>:<ms>, got '${value}'`);
        s.slowFirst = { count: int(name, m[1], 1, 1_000), ms: int(name, m[2], 0, 600_000) };
        break;
      }
      case 'key-sha256':
        if (!/^[0-9a-f]{64}$/.test(value)) throw new ScriptError(`sim directive 'key-sha256' needs 64 lower-case hex digits`);
        s.keySha256 = value;
        break;
      case 'block':
        s.block = true;
        break;
      case 'no-usage':
        s.noUsage = true;
        break;
      case 'under-usage':
        s.underUsage = true;
        break;
      case 'cut-stream':
        s.cutStream = true;
        break;
      case 'reject-n':
        s.rejectN = true;
        break;
      case 'fragment':
        s.fragment = true;
        break;
      case 'echo':
        s.echo = true;
        break;
      case 'hostile-fields':
        s.hostileFields = true;
        break;
    }
  }
  return s;
}

/** Splits the model name from its directives, merges the header script over them and validates everything. */
export function resolveScript(modelSpec: string, header?: string): ResolvedScript {
  const cut = modelSpec.indexOf(';');
  const model = (cut < 0 ? modelSpec : modelSpec.slice(0, cut)).trim();
  const raw = parseDirectives(cut < 0 ? '' : modelSpec.slice(cut + 1));
  if (header) for (const [k, v] of parseDirectives(header)) raw.set(k, v);
  const script = toScript(raw);
  const directives = [...raw].map(([k, v]) => (v === undefined ? k : `${k}=${v}`)).sort();
  return { model, script, directives };
}

/** Metric label for a scenario: directive names only (bounded cardinality). */
export function scenarioLabel(directives: string[]): string {
  return directives.length ? directives.map((d) => d.split('=')[0]).join(',') : 'none';
}
