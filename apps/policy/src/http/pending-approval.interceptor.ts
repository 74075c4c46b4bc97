import { CallHandler, ExecutionContext, Injectable, NestInterceptor } from '@nestjs/common';
import type { Response } from 'express';
import { map, Observable } from 'rxjs';
import { PendingChange } from '../usecases/change-requests';

/** A write that became a change request answers `202 Accepted` with the request, not 200/201. */
@Injectable()
export class PendingApprovalInterceptor implements NestInterceptor {
  intercept(ctx: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(
      map((value: unknown) => {
        if (!(value instanceof PendingChange)) return value;
        ctx.switchToHttp().getResponse<Response>().status(202);
        return value.body;
      }),
    );
  }
}
