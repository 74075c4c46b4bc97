import { Injectable } from '@nestjs/common';
import type { Request, Response } from 'express';
import type { Logger } from 'pino';
import { DispatchReplyV1 } from '@gateway/contracts';
import { DomainError } from '@gateway/domain';
import { GatewayError, InjectLogger, writeDenial } from '@gateway/service-kit';
import { AdmitRequestCommand } from '../usecases/admit-request/admit-request.command';
import { AdmitRequest, AdmittedAction, IdempotentReplay } from '../usecases/admit-request/admit-request.usecase';
import { AdmissionMetrics } from '../admission.metrics';
import { ReplyCache } from './reply-cache';

/**
 * Turns an admitted action into the HTTP answer in the caller's dialect: a whole JSON response
 * or an SSE stream, with the x-gateway-* headers. Content passes through memory only.
 */
@Injectable()
export class GenerationResponder {
  constructor(
    private readonly admit: AdmitRequest,
    private readonly cache: ReplyCache,
    private readonly metrics: AdmissionMetrics,
    @InjectLogger() private readonly log: Logger,
  ) {}

  async serve(build: () => AdmitRequestCommand, req: Request, res: Response): Promise<void> {
    const started = process.hrtime.bigint();
    let outcome = 'error';
    try {
      const cmd = build();
      const admitted = await this.admit.execute(cmd);
      outcome = cmd.stream ? await this.stream(admitted, cmd, res) : await this.whole(admitted, res);
    } catch (err) {
      outcome = await this.fail(err, req, res);
    } finally {
      this.metrics.latency.observe({ outcome }, Number(process.hrtime.bigint() - started) / 1e9);
    }
  }

  private async whole(admitted: AdmittedAction, res: Response): Promise<string> {
    const reply = await new Promise<DispatchReplyV1 | 'timeout' | 'client_gone'>((resolve) => {
      void this.admit
        .dispatch(
          admitted,
          (r) => {
            if (r.kind === 'response' || r.kind === 'error') resolve(r);
          },
          () => resolve('timeout'),
        )
        .then((stop) =>
          res.on('close', () => {
            // The client left before the answer: stop waiting (dispatch and settlement carry on).
            stop();
            resolve('client_gone');
          }),
        )
        .catch((err: Error) => {
          this.log.error({ action_id: admitted.actionId, error: err.message }, 'dispatch publish failed');
          resolve({
            kind: 'error',
            http_status: 502,
            code: 'upstream_error',
            message: `the request could not be dispatched (action ${admitted.actionId})`,
            attempt_id: null,
            provider_request_id: null,
            requested_candidates: null,
            effective_candidates: admitted.command.effective_candidates,
            returned_candidates: null,
            candidates: [],
          });
        });
    });
    if (reply === 'client_gone') return 'client_disconnected';
    if (reply !== 'timeout') this.cache.put(admitted.actionId, reply);
    return this.writeReply(admitted.actionId, admitted.headers, reply, res);
  }

  writeReply(actionId: string, headers: Record<string, string>, reply: DispatchReplyV1 | 'timeout', res: Response): string {
    for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
    if (reply === 'timeout') {
      writeDenial(res.req, res, new DomainError('deadline_exceeded', `no acceptable answer before the deadline (action ${actionId})`));
      return 'deadline_exceeded';
    }
    if (reply.kind === 'response') {
      res.setHeader('x-gateway-returned-candidates', String(reply.returned_candidates ?? 0));
      res.status(reply.http_status).json(reply.body);
      return 'answered';
    }
    if (reply.kind === 'error') {
      res.setHeader('x-gateway-returned-candidates', String(reply.returned_candidates ?? 0));
      const code =
        reply.code === 'deadline_exceeded' ? 'deadline_exceeded' : reply.code === 'invalid_request' ? 'invalid_request' : 'upstream_error';
      // A route that refuses what its contract promised will refuse again: retrying only spends.
      if (reply.code === 'upstream_contract_failure') res.setHeader('x-should-retry', 'false');
      writeDenial(res.req, res, new DomainError(code, reply.message));
      return code;
    }
    return 'unexpected_reply';
  }

  private async stream(admitted: AdmittedAction, cmd: AdmitRequestCommand, res: Response): Promise<string> {
    for (const [k, v] of Object.entries(admitted.headers)) res.setHeader(k, v);
    const gemini = cmd.apiKind === 'gemini-generate';
    // Gemini clients that do not ask for `alt=sse` get a JSON array streamed element by element.
    const jsonArray = gemini && cmd.streamFormat === 'json-array';
    const separator = gemini ? '\r\n\r\n' : '\n\n';
    let expectedSeq = 0;
    const early = new Map<number, string>();
    let opened = false;
    const open = () => {
      if (opened) return;
      opened = true;
      res.status(200);
      res.setHeader('content-type', jsonArray ? 'application/json' : 'text/event-stream');
      res.setHeader('cache-control', 'no-cache');
      res.flushHeaders();
      if (jsonArray) res.write('[');
    };
    const frame = (data: string, first: boolean) => (jsonArray ? `${first ? '' : ',\r\n'}${data}` : `data: ${data}${separator}`);
    const close = () => {
      if (jsonArray) res.write(']');
      res.end();
    };
    return new Promise<string>((resolve) => {
      let stop: () => void = () => undefined;
      const finish = (outcome: string) => {
        stop();
        resolve(outcome);
      };
      const writeInOrder = () => {
        while (early.has(expectedSeq)) {
          open();
          res.write(frame(early.get(expectedSeq) ?? '', expectedSeq === 0));
          early.delete(expectedSeq);
          expectedSeq++;
        }
      };
      void this.admit
        .dispatch(
          admitted,
          (r) => {
            if (r.kind === 'stream_chunk') {
              early.set(r.seq, r.data);
              writeInOrder();
            } else if (r.kind === 'stream_end') {
              writeInOrder();
              if (r.complete && !gemini) {
                open();
                res.write(`data: [DONE]${separator}`);
              }
              if (!opened) open();
              // A cut stream ends without its closing bracket / [DONE], as the provider's did.
              if (r.complete) close();
              else res.end();
              finish(r.complete ? 'answered' : 'stream_cut');
            } else if (r.kind === 'error') {
              if (opened) {
                res.end();
                finish('upstream_error');
              } else {
                finish(this.writeReply(admitted.actionId, {}, r, res));
              }
            } else {
              if (!opened) finish(this.writeReply(admitted.actionId, {}, r, res));
            }
          },
          () => {
            if (opened) res.end();
            else this.writeReply(admitted.actionId, {}, 'timeout', res);
            finish('deadline_exceeded');
          },
        )
        .then((s) => {
          stop = s;
        })
        .catch((err) => {
          this.log.error({ action_id: admitted.actionId, error: (err as Error).message }, 'dispatch publish failed');
          if (opened) res.end();
          else
            writeDenial(
              res.req,
              res,
              new DomainError(
                'upstream_error',
                `the request could not be dispatched (action ${admitted.actionId}); its reservation is released after the dispatch deadline`,
              ),
            );
          finish('publish_failed');
        });
      res.on('close', () => {
        // The client left; dispatch keeps reading upstream so usage still arrives and settles.
        if (!res.writableEnded) finish('client_disconnected');
      });
    });
  }

  private async fail(err: unknown, req: Request, res: Response): Promise<string> {
    if (err instanceof IdempotentReplay) {
      const cached = this.cache.get(err.actionId);
      if (cached) {
        res.setHeader('x-gateway-idempotent-replay', 'true');
        return this.writeReply(err.actionId, { 'x-gateway-action-id': err.actionId }, cached, res);
      }
      writeDenial(
        req,
        res,
        new DomainError(
          'idempotency_key_reused',
          `this Idempotency-Key already created action ${err.actionId}; its result is no longer held, see GET /v1/actions/${err.actionId}`,
        ),
      );
      return 'idempotency_replay';
    }
    if (err instanceof GatewayError) {
      writeDenial(req, res, err, err.headers);
      return err.code;
    }
    if (err instanceof DomainError) {
      writeDenial(req, res, err);
      return err.code;
    }
    this.log.error({ error: (err as Error)?.name, message: (err as Error)?.message }, 'admission failed');
    if (!res.headersSent)
      res.status(500).json({ error: { message: 'internal error', type: 'api_error', code: 'internal_error', param: null } });
    return 'internal_error';
  }
}
