import type { Request } from 'express';

export function bearer(req: Request): string | null {
  const h = req.headers.authorization;
  if (!h) return null;
  const m = /^Bearer\s+(.+)$/i.exec(h);
  return m ? m[1].trim() : null;
}

/** Gemini clients send the key in x-goog-api-key (or, older ones, ?key=). */
export function googApiKey(req: Request): string | null {
  const h = req.headers['x-goog-api-key'];
  if (typeof h === 'string' && h.length > 0) return h;
  const q = req.query.key;
  return typeof q === 'string' && q.length > 0 ? q : bearer(req);
}

/** The fan-out header as sent (a repeated header arrives joined, and is judged as one value). */
export function workflowHeader(req: Pick<Request, 'headers'>): string | null {
  const h = req.headers['x-gateway-workflow-id'];
  if (h === undefined) return null;
  return Array.isArray(h) ? h.join(', ') : h;
}
