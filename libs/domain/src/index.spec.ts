import * as domain from './index';

describe('@gateway/domain public API', () => {
  it.each([
    'DomainError',
    'denialHttpStatus',
    'denialShouldRetry',
    'normaliseCandidateCount',
    'approvedMaxCandidates',
    'priceUsage',
    'estimateCostMicrousd',
    'computeReservation',
    'outputCeiling',
    'estimateInputTokens',
    'planSettle',
    'planCaseResolution',
    'defineMachine',
    'InvalidTransitionError',
    'actionMachine',
    'attemptMachine',
    'reservationMachine',
    'exceptionMachine',
    'canApprove',
    'effectiveExceptionStatus',
    'normaliseFinishReason',
    'accept',
    'candidateShortfall',
    'canonicalJson',
    'fingerprint',
    'requestFingerprint',
  ])('exports %s', (name) => {
    expect(typeof (domain as Record<string, unknown>)[name]).toMatch(/function|object/);
  });
});
