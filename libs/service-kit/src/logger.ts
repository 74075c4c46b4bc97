import pino, { DestinationStream, Logger } from 'pino';

/**
 * JSON logs that never carry content: request logs keep method, path (no query string: Gemini
 * clients may put a key there), status and duration; headers and bodies are never logged.
 */
export function createLogger(service: string, level: string, destination?: DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    level,
    base: { service },
    // Belt and braces: no code logs these, but an object logged by mistake must not carry a key.
    redact: {
      paths: [
        'req.headers',
        'headers',
        'authorization',
        '*.authorization',
        '["x-goog-api-key"]',
        '*["x-goog-api-key"]',
        'credential',
        '*.credential',
        'body',
        '*.body',
      ],
      remove: true,
    },
  };
  return destination ? pino(options, destination) : pino(options);
}

export const httpLogSerializers = {
  req: (req: { method?: string; url?: string }) => ({ method: req.method, path: (req.url ?? '').split('?')[0] }),
  res: (res: { statusCode?: number }) => ({ statusCode: res.statusCode }),
};
