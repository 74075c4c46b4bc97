import { DynamicModule, Module } from '@nestjs/common';
import {
  ActionWithdrawal,
  AdmissionRepository,
  ChangeRequestRepository,
  ControlsRepository,
  Database,
  ExceptionRepository,
  ExperimentRepository,
  HedgePolicyRepository,
  OutboxRepository,
} from '@gateway/db';
import { ContentCipher, ReplyRouter } from '@gateway/messaging';
import type { Logger } from 'pino';
import { CoreModule, CoreOptions, dispatchRepliesConsumer, DispatchRepliesIntake, LOGGER } from '@gateway/service-kit';
import { EXPIRY_SWEEP_MS, ExpirySweeper } from './expiry-sweeper';
import { ChangeRequestsController } from './http/change-requests.controller';
import { ExceptionsController } from './http/exceptions.controller';
import { RoutesController } from './http/routes.controller';
import { WorkloadsController } from './http/workloads.controller';
import { ScopeLimitsController } from './http/scope-limits.controller';
import { PutHedgePolicy } from './usecases/put-hedge-policy/put-hedge-policy.usecase';
import { StartExperiment } from './usecases/start-experiment/start-experiment.usecase';
import { StopExperiment } from './usecases/stop-experiment/stop-experiment.usecase';
import { ExperimentsController } from './http/experiments.controller';
import { PutScopeLimit } from './usecases/put-scope-limit/put-scope-limit.usecase';
import { PutControlThresholds } from './usecases/put-control-thresholds/put-control-thresholds.usecase';
import { PROBE_OPTIONS, RouteProbe } from './probe/route-probe';
import { UPSTREAM_ALLOWLIST } from './upstream-allowlist';
import { AddPriceRevision } from './usecases/add-price-revision/add-price-revision.usecase';
import { CreateRoute } from './usecases/create-route/create-route.usecase';
import { DecideChangeRequest } from './usecases/decide-change-request/decide-change-request.usecase';
import { DecideException } from './usecases/decide-exception/decide-exception.usecase';
import { ExpireExceptions } from './usecases/expire-exceptions/expire-exceptions.usecase';
import { GetException } from './usecases/get-exception/get-exception.usecase';
import { GetRoute } from './usecases/get-route/get-route.usecase';
import { GetWorkload } from './usecases/get-workload/get-workload.usecase';
import { IssueApiKey } from './usecases/issue-api-key/issue-api-key.usecase';
import { ListChangeRequests } from './usecases/list-change-requests/list-change-requests.usecase';
import { ListExceptions } from './usecases/list-exceptions/list-exceptions.usecase';
import { ListRoutes } from './usecases/list-routes/list-routes.usecase';
import { PutWorkload } from './usecases/put-workload/put-workload.usecase';
import { RequestException } from './usecases/request-exception/request-exception.usecase';
import { RevokeApiKey } from './usecases/revoke-api-key/revoke-api-key.usecase';
import { RevokeException } from './usecases/revoke-exception/revoke-exception.usecase';
import { UpdateRouteContract } from './usecases/update-route-contract/update-route-contract.usecase';
import { VerifyRoute } from './usecases/verify-route/verify-route.usecase';

export interface PolicyOptions extends CoreOptions {
  probeTimeoutMs: number;
  /** probes travel to dispatch encrypted, like every dispatch command */
  cipher: ContentCipher;
  upstreamAllowlist: readonly string[];
  expirySweepMs: number;
}

@Module({})
export class PolicyModule {
  static register(opts: PolicyOptions): DynamicModule {
    return {
      module: PolicyModule,
      imports: [CoreModule.forService(opts)],
      controllers: [
        RoutesController,
        WorkloadsController,
        ScopeLimitsController,
        ExceptionsController,
        ChangeRequestsController,
        ExperimentsController,
        dispatchRepliesConsumer('probeReplies', 'policy-replies', 1),
      ],
      providers: [
        { provide: EXPIRY_SWEEP_MS, useValue: opts.expirySweepMs },
        { provide: UPSTREAM_ALLOWLIST, useValue: opts.upstreamAllowlist },
        { provide: PROBE_OPTIONS, useValue: { timeoutMs: opts.probeTimeoutMs } },
        { provide: ContentCipher, useValue: opts.cipher },
        { provide: ReplyRouter, useValue: new ReplyRouter() },
        {
          provide: AdmissionRepository,
          useFactory: (db: Database, outbox: OutboxRepository) => new AdmissionRepository(db, outbox),
          inject: [Database, OutboxRepository],
        },
        DispatchRepliesIntake,
        // a probe whose command could not be confirmed sent is withdrawn at once (libs/db voidUndispatchedAction)
        { provide: ActionWithdrawal, useFactory: (db: Database, log: Logger) => new ActionWithdrawal(db, log), inject: [Database, LOGGER] },
        RouteProbe,
        {
          provide: ControlsRepository,
          useFactory: (db: Database, outbox: OutboxRepository) => new ControlsRepository(db, outbox),
          inject: [Database, OutboxRepository],
        },
        PutControlThresholds,
        {
          provide: ExceptionRepository,
          useFactory: (db: Database, outbox: OutboxRepository) => new ExceptionRepository(db, outbox),
          inject: [Database, OutboxRepository],
        },
        {
          provide: HedgePolicyRepository,
          useFactory: (db: Database, outbox: OutboxRepository) => new HedgePolicyRepository(db, outbox),
          inject: [Database, OutboxRepository],
        },
        {
          provide: ExperimentRepository,
          useFactory: (db: Database, outbox: OutboxRepository) => new ExperimentRepository(db, outbox),
          inject: [Database, OutboxRepository],
        },
        { provide: ChangeRequestRepository, useFactory: (db: Database) => new ChangeRequestRepository(db), inject: [Database] },
        DecideChangeRequest,
        ListChangeRequests,
        CreateRoute,
        UpdateRouteContract,
        ListRoutes,
        GetRoute,
        VerifyRoute,
        AddPriceRevision,
        PutWorkload,
        PutScopeLimit,
        PutHedgePolicy,
        StartExperiment,
        StopExperiment,
        GetWorkload,
        IssueApiKey,
        RevokeApiKey,
        RequestException,
        DecideException,
        RevokeException,
        ListExceptions,
        GetException,
        ExpireExceptions,
        ExpirySweeper,
      ],
    };
  }
}
