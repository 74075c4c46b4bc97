import type { WorkloadPolicy } from '@gateway/db';
import { DomainError, hashCredential } from '@gateway/domain';

/** The workload a key belongs to, or 401: the one check every workload-key endpoint makes first. */
export async function workloadForKey(
  catalog: { workloadByKeyHash(keyHash: string): Promise<WorkloadPolicy | null> },
  credential: string | null,
): Promise<WorkloadPolicy> {
  const workload = credential ? await catalog.workloadByKeyHash(hashCredential(credential)) : null;
  if (!workload) throw new DomainError('unauthorized', 'missing, unknown or revoked workload key');
  return workload;
}
