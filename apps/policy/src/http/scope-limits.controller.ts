import { CurrentOperator, Operator, OperatorApi, Roles } from '@gateway/service-kit';
import { Body, Controller, Get, Param, Put, UseInterceptors } from '@nestjs/common';
import { ApiBody, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { parseBody } from '../usecases/input';
import { putScopeLimitBody } from '../usecases/put-scope-limit/put-scope-limit.command';
import { PutScopeLimit } from '../usecases/put-scope-limit/put-scope-limit.usecase';
import { bodySchema } from './openapi';
import { PendingApprovalInterceptor } from './pending-approval.interceptor';

@ApiTags('scope-limits')
@OperatorApi()
@ApiResponse({ status: 400, description: 'invalid_request: the body failed validation (param names the field)' })
@UseInterceptors(PendingApprovalInterceptor)
@Controller('scope-limits')
export class ScopeLimitsController {
  constructor(private readonly limits: PutScopeLimit) {}

  @Get()
  @ApiOperation({ summary: 'Token and spend limits of every team and environment. Role: operator or finance' })
  @Roles('operator', 'finance')
  list() {
    return this.limits.list();
  }

  @Get(':scope/:id')
  @ApiOperation({ summary: 'The limits of one team or environment (scope: team | environment). Role: operator or finance' })
  @ApiResponse({ status: 404, description: 'not_found' })
  @Roles('operator', 'finance')
  get(@Param('scope') scope: string, @Param('id') id: string) {
    return this.limits.get(scope, id);
  }

  @Put(':scope/:id')
  @ApiOperation({
    summary:
      'Set the token rate and budget of a team or environment (as workloads declare them; money as integer micro-USD). Role: operator',
  })
  @ApiBody({ schema: bodySchema(putScopeLimitBody) })
  @ApiResponse({ status: 202, description: 'the change raises spend: a pending change request for a second operator' })
  @Roles('operator')
  put(@CurrentOperator() op: Operator, @Param('scope') scope: string, @Param('id') id: string, @Body() body: unknown) {
    return this.limits.execute(op, scope, id, parseBody(putScopeLimitBody, body));
  }
}
