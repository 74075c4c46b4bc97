/**
 * What an incoming generation request asks the provider to spend, whatever spelling it uses.
 *
 * Gemini's JSON API accepts proto field names (`generation_config.candidate_count`) as well as
 * lowerCamel (`generationConfig.candidateCount`), and OpenAI-compatible routes may name their
 * candidate or cap parameter differently from `n` / `max_completion_tokens`. A spelling the
 * gateway does not read is a spelling that escapes the reservation, so every spelling is read
 * here, two that disagree are refused, and all of them are removed from the body: the provider
 * adapter then writes exactly one candidate field and one cap field, with the reserved values.
 */
import { isDeepStrictEqual } from 'node:util';

export type RequestDialect = 'openai-chat' | 'gemini-generate' | 'openai-responses';

/** The contract's names for the two fields that multiply spend. */
export interface SpendFieldNames {
  candidateParam: string | null;
  outputCapParam: string;
}

/** Every spelling of the candidate-count and output-cap fields a dialect's providers accept. */
export function spendFieldSpellings(
  dialect: RequestDialect,
  contract: SpendFieldNames,
): { candidate: readonly string[]; cap: readonly string[] } {
  // The Responses API has one answer and one cap name of its own; the route contract's names
  // describe its chat-completions fields, so they do not apply. The chat spellings of the cap are
  // read (and removed) too, so no second cap escapes the reservation.
  if (dialect === 'openai-responses') return { candidate: [], cap: ['max_output_tokens', 'max_completion_tokens', 'max_tokens'] };
  const base =
    dialect === 'gemini-generate'
      ? { candidate: ['candidateCount', 'candidate_count'], cap: ['maxOutputTokens', 'max_output_tokens'] }
      : { candidate: ['n'], cap: ['max_completion_tokens', 'max_tokens'] };
  // Gemini reads its proto names in lowerCamel too, so a contract name counts in both spellings.
  const named = (name: string) => (dialect === 'gemini-generate' ? [name, toLowerCamel(name)] : [name]);
  return {
    candidate: unique([...base.candidate, ...(contract.candidateParam ? named(contract.candidateParam) : [])]),
    cap: unique([...base.cap, ...named(contract.outputCapParam)]),
  };
}

/** Gemini keeps both fields inside `generationConfig`; OpenAI at the top level. */
export const GEMINI_GENERATION_CONFIG = 'generationConfig';

export type NormalisedRequest =
  | {
      ok: true;
      /** canonical spelling, without any candidate-count or output-cap field */
      body: Record<string, unknown>;
      /** the candidate count as sent (undefined when omitted); the admission decision validates it */
      requestedCandidates: unknown;
      /** the spelling the caller used (or the dialect's usual one when omitted), for messages */
      candidateParamName: string;
      requestedOutputCap: number | null;
    }
  | { ok: false; code: 'invalid_request'; message: string; param: string };

/**
 * Canonicalises a request body and takes the two spend fields out of it.
 * Gemini: every top-level key and every `generationConfig` key is brought to lowerCamel (one level
 * only: keys inside schemas and function declarations are the caller's names and stay as sent).
 * Two spellings of one field with different values are `invalid_request`.
 */
export function normaliseRequest(raw: Record<string, unknown>, dialect: RequestDialect, contract: SpendFieldNames): NormalisedRequest {
  try {
    const body = dialect === 'gemini-generate' ? canonicalGemini(raw) : { ...raw };
    if (dialect === 'openai-responses' && body.n !== undefined && body.n !== null) {
      return {
        ok: false,
        code: 'invalid_request',
        message: 'the Responses API returns one answer per request and has no candidate count (n); send n to /v1/chat/completions',
        param: 'n',
      };
    }
    const container = dialect === 'gemini-generate' ? (asRecord(body[GEMINI_GENERATION_CONFIG]) ?? {}) : body;
    const spellings = spendFieldSpellings(dialect, contract);
    const candidate = takeOne(container, spellings.candidate, dialect === 'gemini-generate' ? 'generationConfig.' : '');
    const cap = takeOne(container, spellings.cap, dialect === 'gemini-generate' ? 'generationConfig.' : '');
    if (dialect === 'gemini-generate' && body[GEMINI_GENERATION_CONFIG] !== undefined) body[GEMINI_GENERATION_CONFIG] = container;
    if (cap.value !== undefined && (typeof cap.value !== 'number' || !Number.isSafeInteger(cap.value) || cap.value < 1)) {
      return {
        ok: false,
        code: 'invalid_request',
        message: `${cap.param} must be an integer greater than or equal to 1`,
        param: cap.param,
      };
    }
    return {
      ok: true,
      body,
      requestedCandidates: candidate.value,
      candidateParamName: candidate.value === undefined ? (dialect === 'gemini-generate' ? 'candidateCount' : 'n') : candidate.param,
      requestedOutputCap: cap.value === undefined ? null : (cap.value as number),
    };
  } catch (err) {
    if (err instanceof SpellingConflict) return { ok: false, code: 'invalid_request', message: err.message, param: err.param };
    throw err;
  }
}

class SpellingConflict extends Error {
  constructor(
    readonly param: string,
    other: string,
  ) {
    super(`${param} and ${other} are two spellings of one field with different values; send one of them`);
  }
}

/** Removes every spelling from `container`; null counts as omitted. Throws on a disagreement. */
function takeOne(container: Record<string, unknown>, spellings: readonly string[], prefix: string): { value: unknown; param: string } {
  let found: { value: unknown; param: string } | null = null;
  for (const name of spellings) {
    if (!Object.hasOwn(container, name)) continue;
    const value = container[name];
    delete container[name];
    if (value === null || value === undefined) continue;
    if (found && !isDeepStrictEqual(found.value, value)) throw new SpellingConflict(prefix + found.param, prefix + name);
    found ??= { value, param: name };
  }
  return found ? { value: found.value, param: prefix + found.param } : { value: undefined, param: prefix + spellings[0] };
}

function canonicalGemini(raw: Record<string, unknown>): Record<string, unknown> {
  const body = camelKeys(raw, '', (key, a, b) => (key === GEMINI_GENERATION_CONFIG ? mergeObjects(key, a, b) : undefined));
  const config = body[GEMINI_GENERATION_CONFIG];
  if (config !== undefined && config !== null) {
    const rec = asRecord(config);
    if (!rec) throw new SpellingConflict(GEMINI_GENERATION_CONFIG, 'an object (generationConfig must be an object)');
    body[GEMINI_GENERATION_CONFIG] = camelKeys(rec, `${GEMINI_GENERATION_CONFIG}.`);
  }
  return body;
}

/**
 * Brings one level of keys to lowerCamel. Two spellings with equal values collapse into one; with
 * different values they conflict, unless `merge` combines them (generation_config + generationConfig).
 */
function camelKeys(
  obj: Record<string, unknown>,
  prefix: string,
  merge: (key: string, a: unknown, b: unknown) => unknown = () => undefined,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const sentAs = new Map<string, string>();
  for (const [key, value] of Object.entries(obj)) {
    const camel = toLowerCamel(key);
    if (!Object.hasOwn(out, camel)) {
      out[camel] = value;
      sentAs.set(camel, key);
      continue;
    }
    if (isDeepStrictEqual(out[camel], value)) continue;
    const merged = merge(camel, out[camel], value);
    if (merged === undefined) throw new SpellingConflict(prefix + sentAs.get(camel)!, prefix + key);
    out[camel] = merged;
  }
  return out;
}

/** Two spellings of one object: their keys together, none given twice with different values. */
function mergeObjects(key: string, a: unknown, b: unknown): Record<string, unknown> {
  const x = asRecord(a);
  const y = asRecord(b);
  if (!x || !y) throw new SpellingConflict(key, `its snake_case spelling`);
  const canonX = camelKeys(x, `${key}.`);
  const canonY = camelKeys(y, `${key}.`);
  for (const [k, v] of Object.entries(canonY)) {
    if (Object.hasOwn(canonX, k) && !isDeepStrictEqual(canonX[k], v)) throw new SpellingConflict(`${key}.${k}`, `its other spelling`);
    canonX[k] = v;
  }
  return canonX;
}

export function toLowerCamel(key: string): string {
  return key.replace(/_+([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

export function asRecord(v: unknown): Record<string, unknown> | null {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
}

function unique(xs: string[]): string[] {
  return [...new Set(xs)];
}
