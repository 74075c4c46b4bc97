import type { NextFunction, Request, RequestHandler, Response } from 'express';
import pino, { DestinationStream, Logger } from 'pino';

/**
 * JSON logs that never carry content: request logs keep method, path (no query string: Gemini
 * clients may put a key there), status and duration; headers and bodies are never logged.
 *
 * Written synchronously to stdout: a line is in the file or pipe when the call returns, so a
 * process killed right after (SIGKILL, the OOM killer) keeps its last lines, and a line costs one
 * `write` on the calling thread. pino's own default is an asynchronous sonic-boom, which hands
 * every line to libuv's thread pool and wakes the event loop when it is written: two thread
 * wake-ups per request line (docs/decisions.md, "Log lines written where they are made").
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
  return pino(options, destination ?? pino.destination({ dest: 1, sync: true }));
}

const NOT_LOGGED = /^\/(health|metrics)/;

/**
 * One line per request, as pino-http wrote it: `request completed`, or `request errored` for a 5xx
 * or a response that failed (both at info level), with method, path (no query string: Gemini
 * clients may put a key there), status and duration; never headers or bodies. A request whose
 * connection closed before its response was written (the client gave up or timed out) is
 * `request aborted`: its status is the one sent, or none when nothing was sent, never the framework's
 * default that no client saw. Health and metrics scrapes are not logged.
 *
 * Not pino-http + nestjs-pino: they built two child loggers per request (serialising and
 * redacting the request each time) and bound them with an AsyncLocalStorage, which turns on
 * async hooks for every promise in the process; no code here logs through the request context.
 * Together that was ~6 % of admission's CPU (docs/decisions.md, "CPU per action").
 */
/**
 * The error a 5xx the handler answered is logged with (pino-http's shape: type, message, stack),
 * one per status code: building one per response cost a stack trace each, 2 % of admission's CPU
 * while it shed load at hundreds of 503s a second, for a stack that is this module's every time.
 */
const failures = new Map<number, Error>();
function failedWith(status: number): Error {
  let err = failures.get(status);
  if (!err) failures.set(status, (err = new Error(`failed with status code ${status}`)));
  return err;
}

export function requestLog(logger: Logger): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => {
    const url = req.originalUrl ?? req.url ?? '';
    if (NOT_LOGGED.test(url)) return next();
    const started = performance.now();
    let done = false;
    const finished = (how: 'finish' | 'close' | Error) => {
      if (done) return;
      done = true;
      res.removeListener('finish', onFinish);
      res.removeListener('close', onClose);
      res.removeListener('error', finished);
      const responseTime = Math.round(performance.now() - started);
      const path = url.split('?')[0];
      if (how === 'close' && !res.headersSent) {
        logger.info({ req: { method: req.method, path }, res: { statusCode: null }, responseTime }, 'request aborted');
        return;
      }
      const fields = { req: { method: req.method, path }, res: { statusCode: res.statusCode } };
      if (how instanceof Error || res.statusCode >= 500) {
        const err = how instanceof Error ? how : failedWith(res.statusCode);
        logger.info({ ...fields, err, responseTime }, 'request errored');
      } else {
        logger.info({ ...fields, responseTime }, how === 'close' ? 'request aborted' : 'request completed');
      }
    };
    const onFinish = () => finished('finish');
    const onClose = () => finished('close');
    res.on('finish', onFinish);
    res.on('close', onClose);
    res.on('error', finished);
    next();
  };
}
