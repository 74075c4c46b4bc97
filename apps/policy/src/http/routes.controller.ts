import { CurrentOperator, Operator, OperatorApi, Roles } from '@gateway/service-kit';
import { Body, Controller, Get, HttpCode, Param, Post, Put, UseInterceptors } from '@nestjs/common';
import { ApiBody, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { AddPriceRevision } from '../usecases/add-price-revision/add-price-revision.usecase';
import { addPriceRevisionBody } from '../usecases/add-price-revision/add-price-revision.command';
import { CreateRoute } from '../usecases/create-route/create-route.usecase';
import { createRouteBody } from '../usecases/create-route/create-route.command';
import { GetRoute } from '../usecases/get-route/get-route.usecase';
import { parseBody } from '../usecases/input';
import { ListRoutes } from '../usecases/list-routes/list-routes.usecase';
import { UpdateRouteContract } from '../usecases/update-route-contract/update-route-contract.usecase';
import { updateRouteContractBody } from '../usecases/update-route-contract/update-route-contract.command';
import { VerifyRoute } from '../usecases/verify-route/verify-route.usecase';
import { verifyRouteBody } from '../usecases/verify-route/verify-route.command';
import { bodySchema } from './openapi';
import { PendingApprovalInterceptor } from './pending-approval.interceptor';

@ApiTags('routes')
@OperatorApi()
@ApiResponse({ status: 400, description: 'invalid_request: the body failed validation (param names the field)' })
@UseInterceptors(PendingApprovalInterceptor)
@Controller('routes')
export class RoutesController {
  constructor(
    private readonly createRoute: CreateRoute,
    private readonly updateContract: UpdateRouteContract,
    private readonly listRoutes: ListRoutes,
    private readonly getRoute: GetRoute,
    private readonly verifyRoute: VerifyRoute,
    private readonly addPriceRevision: AddPriceRevision,
  ) {}

  @Post()
  @ApiOperation({ summary: 'Create a route: alias + contract version 1 (unverified). Role: operator' })
  @ApiBody({ schema: bodySchema(createRouteBody) })
  @ApiResponse({ status: 409, description: 'route_exists / alias_taken' })
  @Roles('operator')
  create(@CurrentOperator() op: Operator, @Body() body: unknown) {
    return this.createRoute.execute(op, parseBody(createRouteBody, body));
  }

  @Get()
  @ApiOperation({ summary: 'Routes with their current contract and verification state (verified / unverified / stale). Role: operator' })
  @Roles('operator')
  list() {
    return this.listRoutes.execute();
  }

  @Get(':id')
  @ApiOperation({ summary: 'One route: every contract version with its verification state, and its price revisions. Role: operator' })
  @ApiResponse({ status: 404, description: 'not_found' })
  @Roles('operator')
  get(@Param('id') id: string) {
    return this.getRoute.execute(id);
  }

  @Put(':id/contract')
  @ApiOperation({
    summary: 'Replace the contract: any change appends a new, unverified version; the same contract again is a no-op. Role: operator',
  })
  @ApiBody({ schema: bodySchema(updateRouteContractBody) })
  @ApiResponse({ status: 202, description: 'a new upstream URL, provider or model: a pending change request for a second operator' })
  @ApiResponse({ status: 404, description: 'not_found' })
  @ApiResponse({ status: 409, description: 'alias_taken' })
  @Roles('operator')
  putContract(@CurrentOperator() op: Operator, @Param('id') id: string, @Body() body: unknown) {
    return this.updateContract.execute(op, id, parseBody(updateRouteContractBody, body));
  }

  @Post(':id/verify')
  @HttpCode(200)
  @ApiOperation({
    summary:
      'Record verification (verified_at / verified_by) of the current version. probe=true first sends a 2-candidate request with a tiny output cap upstream, through dispatch, and refuses unless 2 candidates with aggregate usage come back. A probe is spend: it is reserved against the operations workload (gateway-operations) budget and settled in the ledger with attempt_role probe. Role: operator',
  })
  @ApiBody({ schema: bodySchema(verifyRouteBody) })
  @ApiResponse({ status: 403, description: 'budget_exhausted: the operations budget cannot fund the probe' })
  @ApiResponse({ status: 409, description: 'probe_failed / version_not_current / route_unpriced (a probe needs a price in force)' })
  @Roles('operator')
  verify(@CurrentOperator() op: Operator, @Param('id') id: string, @Body() body: unknown) {
    return this.verifyRoute.execute(op, id, parseBody(verifyRouteBody, body ?? {}));
  }

  @Post(':id/prices')
  @ApiOperation({
    summary:
      'Add an immutable price revision: integer micro-USD per 1M tokens per category, optionally context tiers, service tiers and per-call fees. Role: operator or finance',
  })
  @ApiBody({ schema: bodySchema(addPriceRevisionBody) })
  @ApiResponse({ status: 409, description: 'price_revision_exists' })
  @ApiResponse({
    status: 202,
    description:
      "a route's first price, or one that makes spend cheaper to book (a lowered rate, a removed or moved tier, a lowered or removed fee, a newly priced feature): a pending change request for a second operator",
  })
  @Roles('operator', 'finance')
  addPrice(@CurrentOperator() op: Operator, @Param('id') id: string, @Body() body: unknown) {
    return this.addPriceRevision.execute(op, id, parseBody(addPriceRevisionBody, body));
  }
}
