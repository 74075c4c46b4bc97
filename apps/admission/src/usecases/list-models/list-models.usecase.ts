import { Inject, Injectable } from '@nestjs/common';
import type { RouteContract } from '@gateway/db';
import { DomainError } from '@gateway/domain';
import { CatalogCache } from '../../catalog-cache';
import { dialectServes } from '../admit-request/admit-request.usecase';
import { workloadForKey } from '../workload-key';

export type ModelDialect = 'openai-chat' | 'gemini-generate';

export interface ModelEntry {
  alias: string;
  route: RouteContract;
}

/**
 * The model aliases a workload may call in one dialect: those in its policy whose route exists
 * and speaks that dialect (an OpenAI SDK is shown the OpenAI-kind routes, a Gemini SDK the Gemini
 * ones). Being listed means mapped: a route whose contract is unverified or stale is listed and
 * then refused with 403 `route_contract_unverified`, as a call to it would be.
 */
@Injectable()
export class ListModels {
  constructor(@Inject(CatalogCache) private readonly catalog: Pick<CatalogCache, 'workloadByKeyHash' | 'routeByAlias'>) {}

  async execute(credential: string | null, dialect: ModelDialect): Promise<ModelEntry[]> {
    const workload = await workloadForKey(this.catalog, credential);
    const entries = await Promise.all(workload.allowedAliases.map((alias) => this.entry(alias, dialect)));
    return entries.filter((e): e is ModelEntry => e !== null).sort((a, b) => a.alias.localeCompare(b.alias));
  }

  async one(credential: string | null, dialect: ModelDialect, alias: string): Promise<ModelEntry> {
    const workload = await workloadForKey(this.catalog, credential);
    const entry = workload.allowedAliases.includes(alias) ? await this.entry(alias, dialect) : null;
    if (!entry) throw new DomainError('unknown_route', `model alias '${alias}' is not mapped for workload ${workload.id}`, 'model');
    return entry;
  }

  private async entry(alias: string, dialect: ModelDialect): Promise<ModelEntry | null> {
    const route = await this.catalog.routeByAlias(alias);
    return route && dialectServes(dialect, route.providerKind) ? { alias, route } : null;
  }
}
