import { z } from 'zod';
import { DomainError } from '@gateway/domain';

/**
 * Shared pieces of the policy API's request schemas. Every body is parsed here, so bad input is
 * always a 400 `invalid_request` naming the offending field, never a database error.
 */

/** Postgres `integer` columns. */
export const MAX_INT4 = 2_147_483_647;
/** Postgres `bigint` columns (money). */
export const MAX_INT8 = 9_223_372_036_854_775_807n;

export const int = (min: number, max = MAX_INT4) => z.number().int().min(min).max(max);

/**
 * Integer micro-USD, as a JSON number (a safe integer) or a string of digits; never a float.
 * Strings are the safe choice above 2^53.
 */
export const microusd = z.union([z.number(), z.string()]).transform((v, ctx) => {
  const ok = typeof v === 'number' ? Number.isSafeInteger(v) && v >= 0 : /^\d{1,19}$/.test(v);
  const amount = ok ? BigInt(v) : null;
  if (amount === null || amount > MAX_INT8) {
    ctx.addIssue({
      code: 'custom',
      message: 'must be a non-negative integer number of micro-USD (a JSON integer below 2^53 or a string of digits), never a float',
    });
    return z.NEVER;
  }
  return amount;
});

export const text = (max: number) => z.string().trim().min(1).max(max);

/** Operator-chosen identifiers (routes, workloads): stable, URL-safe. */
export const resourceId = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/, 'must be 1-128 characters of letters, digits, . _ : - (starting with a letter or digit)');

export const isoInstant = z.iso.datetime({ offset: true }).transform((s) => new Date(s));

/** Parses a body or throws the stable 400; the first problem names its field in `param`. */
export function parseBody<S extends z.ZodTypeAny>(schema: S, raw: unknown): z.output<S> {
  if (raw === undefined || raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new DomainError('invalid_request', 'request body must be a JSON object');
  }
  return parseValue(schema, raw);
}

export function parseValue<S extends z.ZodTypeAny>(schema: S, raw: unknown, paramPrefix?: string): z.output<S> {
  const parsed = schema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const path = [...(paramPrefix ? [paramPrefix] : []), ...issue.path.map(String)];
  if (issue.code === 'unrecognized_keys') path.push(issue.keys[0]);
  const param = path.length > 0 ? path.join('.') : undefined;
  const missing = issue.code !== 'unrecognized_keys' && issue.path.length > 0 && valueAt(raw, issue.path) === undefined;
  const message =
    issue.code === 'unrecognized_keys'
      ? `unknown field '${param}'`
      : missing
        ? `${param} is required`
        : `${param ?? 'body'}: ${issue.message}`;
  throw new DomainError('invalid_request', message, param);
}

function valueAt(raw: unknown, path: readonly PropertyKey[]): unknown {
  let v: unknown = raw;
  for (const k of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<PropertyKey, unknown>)[k];
  }
  return v;
}
