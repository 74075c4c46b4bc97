import { Controller, Get, Param, Req } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { Request } from 'express';
import { GetAction } from '../usecases/get-action/get-action.usecase';
import { bearer } from './credentials';

@ApiTags('actions')
@ApiBearerAuth()
@Controller('v1/actions')
export class ActionsController {
  constructor(private readonly getAction: GetAction) {}

  @Get(':actionId')
  @ApiOperation({
    summary:
      'Sanitised status of one action: attempts (role, attempt_no, route, own hold, winner, deadline outcome, policy revision), counts, usage, reserved, settled and unresolved amounts',
  })
  get(@Param('actionId') actionId: string, @Req() req: Request) {
    return this.getAction.execute(bearer(req) ?? (req.headers['x-goog-api-key'] as string | undefined) ?? null, actionId);
  }
}
