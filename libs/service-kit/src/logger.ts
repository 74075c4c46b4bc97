import pino, { Logger } from 'pino';

/**
 * JSON logs that never carry content: request logs keep method, path (no query string: Gemini
 * clients may put a key there), status and duration; headers and bodies are never logged.
 */
export function createLogger(service: string, level: string): Logger {
  return pino({
    level,
    base: { service },
    redact: { paths: ['req.headers', 'headers', 'authorization', '*.authorization', 'body', '*.body'], remove: true },
  });
}

export const httpLogSerializers = {
  req: (req: { method?: string; url?: string }) => ({ method: req.method, path: (req.url ?? '').split('?')[0] }),
  res: (res: { statusCode?: number }) => ({ statusCode: res.statusCode }),
};
