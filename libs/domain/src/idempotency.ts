/**
 * Request fingerprints for idempotency keys: a retried request with the same key must be
 * byte-for-byte the same request, regardless of how the client serialised its JSON.
 * Hashing is pure computation, so node:crypto is allowed here.
 */
import { createHash } from 'node:crypto';

/**
 * JSON with object keys sorted (UTF-16 code-unit order) at every level, no whitespace.
 *
 * Follows JSON.stringify for `toJSON`, undefined/function-valued properties (dropped) and
 * holes/undefined in arrays (null). It throws where JSON.stringify would lose information
 * silently and make two different requests collide: non-finite numbers, bigint, symbols,
 * Map/Set, cycles, and an undefined top-level value.
 */
export function canonicalJson(value: unknown): string {
  const out = write(value, new Set());
  if (out === undefined) throw new TypeError('canonicalJson: top-level value is not serialisable');
  return out;
}

function write(value: unknown, ancestors: Set<object>): string | undefined {
  if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    value = (value as { toJSON: () => unknown }).toJSON();
  }
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError(`canonicalJson: non-finite number ${value}`);
      return JSON.stringify(value);
    case 'undefined':
    case 'function':
      return undefined;
    case 'bigint':
    case 'symbol':
      throw new TypeError(`canonicalJson: ${typeof value} is not representable in JSON`);
    case 'object':
      return value === null ? 'null' : writeObject(value, ancestors);
    default:
      // typeof is closed over these eight results; `unknown` just cannot be narrowed to never.
      throw new TypeError(`canonicalJson: unsupported value of type ${typeof value}`);
  }
}

function writeObject(value: object, ancestors: Set<object>): string {
  if (value instanceof Map || value instanceof Set) {
    throw new TypeError('canonicalJson: Map and Set are not representable in JSON');
  }
  if (ancestors.has(value)) throw new TypeError('canonicalJson: cyclic structure');
  ancestors.add(value);
  try {
    if (Array.isArray(value)) {
      const items: string[] = [];
      for (let i = 0; i < value.length; i++) items.push(write(value[i], ancestors) ?? 'null');
      return `[${items.join(',')}]`;
    }
    const record = value as Record<string, unknown>;
    const members: string[] = [];
    for (const key of Object.keys(record).sort()) {
      const v = write(record[key], ancestors);
      if (v !== undefined) members.push(`${JSON.stringify(key)}:${v}`);
    }
    return `{${members.join(',')}}`;
  } finally {
    ancestors.delete(value);
  }
}

/** sha256 hex of text that is already canonical JSON. */
export function requestFingerprint(canonicalJsonText: string): string {
  return createHash('sha256').update(canonicalJsonText, 'utf8').digest('hex');
}

/** sha256 hex of the canonical JSON of `value`. */
export function fingerprint(value: unknown): string {
  return requestFingerprint(canonicalJson(value));
}
