import { lookup as dnsLookup, LookupAddress } from 'node:dns';
import { isIP, LookupFunction } from 'node:net';
import { Agent, buildConnector } from 'undici';
import { checkUpstreamUrl, resolvedAddressAllowed } from '@gateway/domain';

/** Refusal of a connection to an upstream outside the allowlist (nothing was sent). */
export class UpstreamNotAllowedError extends Error {
  readonly code = 'UPSTREAM_NOT_ALLOWED';
  constructor(message: string) {
    super(message);
    this.name = 'UpstreamNotAllowedError';
  }
}

/**
 * The one HTTP agent for calls to providers (dispatch's attempts, policy's probes). Every new
 * connection is checked where it is made: the host must pass `checkUpstreamUrl` against the
 * allowlist, and every address a name resolves to must be public or itself allowlisted, so a
 * public name that resolves to a private address (DNS rebinding) is refused at send time.
 */
export function upstreamAgent(allowlist: readonly string[], options: Omit<Agent.Options, 'connect'> = {}): Agent {
  const base = buildConnector({ lookup: guardedLookup(allowlist) });
  const connect: buildConnector.connector = (opts, callback) => {
    const host = opts.hostname.startsWith('[') || !opts.hostname.includes(':') ? opts.hostname : `[${opts.hostname}]`;
    const verdict = checkUpstreamUrl(`${opts.protocol}//${host}`, allowlist);
    if (!verdict.ok) return callback(new UpstreamNotAllowedError(`upstream refused: ${verdict.reason}`), null);
    // An address literal never goes through the lookup.
    const bare = opts.hostname.replace(/^\[|\]$/g, '');
    if (isIP(bare) !== 0 && !resolvedAddressAllowed(bare, allowlist)) {
      return callback(new UpstreamNotAllowedError(`upstream refused: ${bare} is not a public address`), null);
    }
    return base(opts, callback);
  };
  return new Agent({ ...options, connect });
}

function guardedLookup(allowlist: readonly string[]): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, '', 4);
      const refused = addresses.find((a) => !resolvedAddressAllowed(a.address, allowlist));
      if (refused) {
        const e = new UpstreamNotAllowedError(`upstream refused: ${hostname} resolves to ${refused.address}, not a public address`);
        return callback(e, '', 4);
      }
      if (options.all) return callback(null, addresses);
      return callback(null, addresses[0].address, addresses[0].family);
    });
  };
}
