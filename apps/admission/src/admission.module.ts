import { DynamicModule, Module } from '@nestjs/common';
import type { Logger } from 'pino';
import { ActionWithdrawal, AdmissionRepository, Database, ExperimentRepository, OutboxRepository, ViewsRepository } from '@gateway/db';
import { ContentCipher, ReplyRouter } from '@gateway/messaging';
import { CoreModule, CoreOptions, dispatchRepliesConsumer, DispatchRepliesIntake, LOGGER } from '@gateway/service-kit';
import { AdmissionMetrics } from './admission.metrics';
import { CatalogCache } from './catalog-cache';
import { ActionsController } from './http/actions.controller';
import { ChatCompletionsController } from './http/chat-completions.controller';
import { GeminiController } from './http/gemini.controller';
import { ResponsesController } from './http/responses.controller';
import { GenerationResponder } from './http/generation.responder';
import { LoadShedding } from './http/load-shedding';
import { ModelsController } from './http/models.controller';
import { ReplyCache } from './http/reply-cache';
import { StreamBacklogs } from './http/stream-backlogs';
import { AdmitRequest } from './usecases/admit-request/admit-request.usecase';
import { CountTokens } from './usecases/count-tokens/count-tokens.usecase';
import { GetAction } from './usecases/get-action/get-action.usecase';
import { ListModels } from './usecases/list-models/list-models.usecase';

@Module({})
export class AdmissionModule {
  static register(core: CoreOptions & { cipher: ContentCipher }): DynamicModule {
    return {
      module: AdmissionModule,
      imports: [CoreModule.forService(core)],
      controllers: [
        ChatCompletionsController,
        ResponsesController,
        GeminiController,
        ModelsController,
        ActionsController,
        dispatchRepliesConsumer('dispatchReplies', 'admission-replies', 1),
      ],
      providers: [
        { provide: ContentCipher, useValue: core.cipher },
        { provide: ReplyRouter, useValue: new ReplyRouter() },
        { provide: ViewsRepository, useFactory: (db: Database) => new ViewsRepository(db), inject: [Database] },
        // withdrawing an admitted action: the sweeper's void, at once (libs/db voidUndispatchedAction)
        { provide: ActionWithdrawal, useFactory: (db: Database, log: Logger) => new ActionWithdrawal(db, log), inject: [Database, LOGGER] },
        {
          provide: AdmissionRepository,
          useFactory: (db: Database, outbox: OutboxRepository) => new AdmissionRepository(db, outbox),
          inject: [Database, OutboxRepository],
        },
        {
          provide: ExperimentRepository,
          useFactory: (db: Database, outbox: OutboxRepository) => new ExperimentRepository(db, outbox),
          inject: [Database, OutboxRepository],
        },
        AdmissionMetrics,
        CatalogCache,
        ReplyCache,
        { provide: StreamBacklogs, useFactory: () => new StreamBacklogs() },
        AdmitRequest,
        GetAction,
        ListModels,
        CountTokens,
        LoadShedding,
        GenerationResponder,
        DispatchRepliesIntake,
      ],
    };
  }
}
