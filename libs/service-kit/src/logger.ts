import type { NextFunction, Request, RequestHandler, Response } from 'express';
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

const NOT_LOGGED = /^\/(health|metrics)/;

/**
 * One line per answered request, as pino-http wrote it (`request completed`, or `request
 * errored` for a 5xx or a response that failed; both at info level), with method, path (no query
 * string: Gemini clients may put a key there), status and duration; never headers or bodies.
 * Health and metrics scrapes are not logged.
 *
 * Not pino-http + nestjs-pino: they built two child loggers per request (serialising and
 * redacting the request each time) and bound them with an AsyncLocalStorage, which turns on
 * async hooks for every promise in the process; no code here logs through the request context.
 * Together that was ~6 % of admission's CPU (docs/decisions.md, "CPU per action").
 */
export function requestLog(logger: Logger): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => {
    const url = req.originalUrl ?? req.url ?? '';
    if (NOT_LOGGED.test(url)) return next();
    const started = performance.now();
    let done = false;
    const finished = (err?: Error) => {
      if (done) return;
      done = true;
      res.removeListener('finish', onFinish);
      res.removeListener('close', onFinish);
      res.removeListener('error', finished);
      const responseTime = Math.round(performance.now() - started);
      const fields = { req: { method: req.method, path: url.split('?')[0] }, res: { statusCode: res.statusCode } };
      if (err || res.statusCode >= 500) {
        logger.info({ ...fields, err: err ?? new Error(`failed with status code ${res.statusCode}`), responseTime }, 'request errored');
      } else {
        logger.info({ ...fields, responseTime }, 'request completed');
      }
    };
    const onFinish = () => finished();
    res.on('finish', onFinish);
    res.on('close', onFinish);
    res.on('error', finished);
    next();
  };
}
