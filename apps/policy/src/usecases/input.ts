import { z } from 'zod';
import {
  DomainError,
  MAX_BUDGET_MICROUSD,
  MAX_RESERVED_OUTPUT_TOKENS,
  MAX_STORED_MICROUSD,
  MAX_STORED_TOKENS,
  PriceRevision,
  worstReservationMicrousd,
} from '@gateway/domain';

/**
 * Shared pieces of the policy API's request schemas. Every body is parsed here, so bad input is
 * always a 400 `invalid_request` naming the offending field, never a database error.
 */

export const int = (min: number, max = MAX_STORED_TOKENS) => z.number().int().min(min).max(max);

/**
 * Integer micro-USD, as a JSON number (a safe integer) or a string of digits; never a float.
 * Strings are the safe choice above 2^53.
 */
export const microusd = z.union([z.number(), z.string()]).transform((v, ctx) => {
  const ok = typeof v === 'number' ? Number.isSafeInteger(v) && v >= 0 : /^\d{1,19}$/.test(v);
  const amount = ok ? BigInt(v) : null;
  if (amount === null || amount > MAX_STORED_MICROUSD) {
    ctx.addIssue({
      code: 'custom',
      message: 'must be a non-negative integer number of micro-USD (a JSON integer below 2^53 or a string of digits), never a float',
    });
    return z.NEVER;
  }
  return amount;
});

/** A budget: at most half of `bigint`, so used + one reservation can be compared with it. */
export const budgetMicrousd = microusd.refine((v) => v <= MAX_BUDGET_MICROUSD, {
  message: `must be at most ${MAX_BUDGET_MICROUSD} micro-USD`,
});

/**
 * Count × per-candidate ceiling is what one admission may reserve (per-candidate semantics, the
 * worst case); it must fit the reservation's integer columns with the largest input estimate
 * beside it. Refused on `ceilingField`, naming the bound and the largest ceiling that would fit.
 */
export function reservableOutput<C extends string, K extends string>(countField: C, ceilingField: K) {
  return (v: Record<C | K, number>, ctx: z.RefinementCtx): void => {
    const [count, ceiling] = [v[countField], v[ceilingField]];
    if (count * ceiling <= MAX_RESERVED_OUTPUT_TOKENS) return;
    ctx.addIssue({
      code: 'custom',
      path: [ceilingField],
      message:
        `${countField} × ${ceilingField} = ${count * ceiling} output tokens, above the ${MAX_RESERVED_OUTPUT_TOKENS} one reservation can hold; ` +
        `with ${count} candidates ${ceilingField} may be at most ${Math.floor(MAX_RESERVED_OUTPUT_TOKENS / count)}`,
    });
  };
}

/**
 * The worst reservation any policy can reach under a price (the largest input estimate and output
 * a reservation may hold, at the dearest tier, with every fee) must fit `bigint` micro-USD.
 * Refused on the largest amount of `body` (a rate or a fee, wherever it sits).
 */
export function checkReservablePrice(ctx: z.RefinementCtx, body: object, price: PriceRevision): void {
  const worst = worstReservationMicrousd(price);
  if (worst <= MAX_STORED_MICROUSD) return;
  const [path] = amountsIn(body).reduce((a, b) => (b[1] > a[1] ? b : a));
  ctx.addIssue({
    code: 'custom',
    path,
    message: `the largest reservation at this price would be ${worst} micro-USD, above the ${MAX_STORED_MICROUSD} the gateway can store; lower the rate`,
  });
}

/** Every bigint in a parsed body, with its path. */
function amountsIn(v: unknown, path: (string | number)[] = []): Array<[(string | number)[], bigint]> {
  if (typeof v === 'bigint') return [[path, v]];
  if (Array.isArray(v)) return v.flatMap((x, i) => amountsIn(x, [...path, i]));
  if (v !== null && typeof v === 'object' && !(v instanceof Date)) {
    return Object.entries(v).flatMap(([k, x]) => amountsIn(x, [...path, k]));
  }
  return [];
}

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
