import { Inject } from '@nestjs/common';
import { checkUpstreamUrl, DomainError } from '@gateway/domain';

/** The hosts a route contract may point at (GATEWAY_UPSTREAM_ALLOWLIST, parsed once at start-up). */
export const UPSTREAM_ALLOWLIST = Symbol('UPSTREAM_ALLOWLIST');
export const InjectUpstreamAllowlist = () => Inject(UPSTREAM_ALLOWLIST);

/** A contract is refused when written if its upstream is outside the allowlist (dispatch checks again). */
export function assertUpstreamAllowed(url: string, allowlist: readonly string[]): void {
  const verdict = checkUpstreamUrl(url, allowlist);
  if (!verdict.ok) throw new DomainError('invalid_request', `upstream_base_url refused: ${verdict.reason}`, 'upstream_base_url');
}
