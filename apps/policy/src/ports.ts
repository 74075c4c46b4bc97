import type {
  CatalogRepository,
  ChangeRequestRepository,
  ExceptionRepository,
  ExperimentRepository,
  HedgePolicyRepository,
  PolicyRepository,
} from '@gateway/db';

/**
 * The slices of the repositories each use case needs. Use cases inject the real classes under
 * these narrow types, so their specs can hand in small in-memory fakes.
 */
export type RouteStore = Pick<
  PolicyRepository,
  | 'createRoute'
  | 'putRouteContract'
  | 'routeById'
  | 'routeIdByAlias'
  | 'listRoutes'
  | 'verifyCurrentVersion'
  | 'recordVerificationNotes'
  | 'putPrice'
  | 'priceById'
>;
export type WorkloadStore = Pick<
  PolicyRepository,
  'putWorkload' | 'workloadById' | 'addApiKey' | 'apiKeyById' | 'revokeApiKey' | 'routeIdByAlias'
>;
export type ExceptionStore = Pick<ExceptionRepository, 'create' | 'findById' | 'eventsOf' | 'list' | 'transition' | 'dueForExpiry'>;
export type WorkloadKeyLookup = Pick<CatalogRepository, 'workloadByKeyHash'>;
export type ChangeRequestStore = Pick<ChangeRequestRepository, 'create' | 'findById' | 'list' | 'decide'>;
export type ScopeLimitStore = Pick<PolicyRepository, 'putScopeLimit' | 'scopeLimit' | 'listScopeLimits'>;
export type HedgePolicyStore = Pick<HedgePolicyRepository, 'append' | 'hedgePolicyFor' | 'history'>;
export type ExperimentStore = Pick<ExperimentRepository, 'start' | 'stop' | 'findById' | 'listByWorkload' | 'reportRows' | 'pausesOf'>;
