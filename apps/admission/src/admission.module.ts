import { DynamicModule, Module } from '@nestjs/common';
import { AdmissionRepository, Database, OutboxRepository, ViewsRepository } from '@gateway/db';
import { ContentCipher, ReplyRouter } from '@gateway/messaging';
import { CoreModule, CoreOptions } from '@gateway/service-kit';
import { AdmissionMetrics } from './admission.metrics';
import { CatalogCache } from './catalog-cache';
import { DispatchRepliesConsumer } from './consumers/dispatch-replies.consumer';
import { DispatchRepliesIntake } from './consumers/dispatch-replies.intake';
import { ActionsController } from './http/actions.controller';
import { ChatCompletionsController } from './http/chat-completions.controller';
import { GeminiController } from './http/gemini.controller';
import { ResponsesController } from './http/responses.controller';
import { GenerationResponder } from './http/generation.responder';
import { ReplyCache } from './http/reply-cache';
import { AdmitRequest } from './usecases/admit-request/admit-request.usecase';
import { GetAction } from './usecases/get-action/get-action.usecase';

@Module({})
export class AdmissionModule {
  static register(core: CoreOptions & { cipher: ContentCipher }): DynamicModule {
    return {
      module: AdmissionModule,
      imports: [CoreModule.forService(core)],
      controllers: [ChatCompletionsController, ResponsesController, GeminiController, ActionsController, DispatchRepliesConsumer],
      providers: [
        { provide: ContentCipher, useValue: core.cipher },
        { provide: ReplyRouter, useValue: new ReplyRouter() },
        { provide: ViewsRepository, useFactory: (db: Database) => new ViewsRepository(db), inject: [Database] },
        {
          provide: AdmissionRepository,
          useFactory: (db: Database, outbox: OutboxRepository) => new AdmissionRepository(db, outbox),
          inject: [Database, OutboxRepository],
        },
        AdmissionMetrics,
        CatalogCache,
        ReplyCache,
        AdmitRequest,
        GetAction,
        GenerationResponder,
        DispatchRepliesIntake,
      ],
    };
  }
}
