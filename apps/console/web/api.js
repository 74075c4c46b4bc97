// The console's only way to the gateway: the services' public APIs under this origin's /api/<service>/
// (apps/console/src/server.ts proxies them unchanged). The operator token lives in memory and in
// sessionStorage (gone when the tab closes), never in a URL.
const STORE = 'gateway-console-token';

export const session = {
  token: sessionStorage.getItem(STORE) ?? '',
  set(token) {
    this.token = token;
    if (token) sessionStorage.setItem(STORE, token);
    else sessionStorage.removeItem(STORE);
  },
};

/** A refusal from an API, with the service's stable code and message. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || code);
    this.status = status;
    this.code = code;
  }
}

/** Calls `/api/<service><path>`; resolves with the parsed body or rejects with an ApiError. */
export async function api(service, path, { method = 'GET', body, token = session.token } = {}) {
  const res = await fetch(`/api/${service}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  if (!res.ok) {
    const e = parsed?.error ?? {};
    throw new ApiError(res.status, e.code ?? e.status ?? `http_${res.status}`, e.message ?? text.slice(0, 200));
  }
  return parsed;
}

/** Workload keys are `gw_…` (apps/policy issue-api-key): they call models, never the operator APIs. */
export const isWorkloadKey = (token) => /^gw_/.test(token.trim());

/**
 * Which roles a token holds, read from what the APIs let it do (there is no "who am I" endpoint):
 * listing exceptions needs operator or approver, reading exposure operator or finance. A token
 * neither accepts is refused (401 from both).
 */
export async function probeRoles(token) {
  const attempt = (service, path) =>
    api(service, path, { token }).then(
      () => 'ok',
      (e) => (e instanceof ApiError ? e : Promise.reject(e)),
    );
  const [exceptions, exposure] = await Promise.all([
    attempt('policy', '/exceptions?limit=1'),
    attempt('reconciliation', '/exposure?workload_id=console-sign-in-probe'),
  ]);
  if (exceptions !== 'ok' && exposure !== 'ok') {
    const refused = [exceptions, exposure].find((e) => e.status === 401) ?? exceptions;
    throw refused;
  }
  const roles = [];
  if (exceptions === 'ok' && exposure === 'ok') roles.push('operator');
  if (exceptions === 'ok' && exposure !== 'ok') roles.push('approver');
  if (exceptions !== 'ok' && exposure === 'ok') roles.push('finance');
  return roles;
}
