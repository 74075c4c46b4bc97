import type { DispatchRepository } from '@gateway/db';
import type { ContentCipher, KafkaBus } from '@gateway/messaging';
import type { UpstreamCredentials } from '@gateway/providers';

/**
 * The slices of dispatch's collaborators that RunAttempt uses. The real classes are injected under
 * these narrow types, so its spec hands in small in-memory fakes without casts.
 */
export type AttemptStore = Pick<DispatchRepository, 'claim' | 'complete' | 'offerLateEvidence' | 'admitExtraAttempt' | 'chooseWinner'>;
export type ReplyPublisher = Pick<KafkaBus, 'publish'>;
export type ReplySealer = Pick<ContentCipher, 'encrypt'>;
export type CredentialSource = Pick<UpstreamCredentials, 'lookup'>;
