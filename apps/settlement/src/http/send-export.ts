import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Response } from 'express';
import type { Logger } from 'pino';
import type { LedgerExport } from '../usecases/export-ledger/export-ledger.usecase';

/**
 * Streams an export with backpressure: a batch is read from the database only once the client has
 * taken the previous one. Once the status is sent nothing can change it, so a failure mid-way (the
 * database, the client leaving) aborts the transfer — the client sees a broken response, never a
 * shorter file that looks whole — and is logged, never thrown into the exception filter.
 */
export async function sendExport(res: Response, out: LedgerExport, log: Logger): Promise<void> {
  res.status(200);
  res.setHeader('content-type', out.contentType);
  res.setHeader('content-disposition', `attachment; filename="${out.filename}"`);
  res.setHeader('cache-control', 'no-store');
  try {
    await pipeline(Readable.from(out.chunks), res);
  } catch (err) {
    log.warn({ error: (err as Error).name, code: (err as { code?: string }).code }, 'ledger export aborted');
    res.destroy();
  }
}
