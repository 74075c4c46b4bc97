import { checkUpstreamUrl, isNonPublicAddress, parseUpstreamAllowlist, resolvedAddressAllowed } from './upstream-url';

const allow = parseUpstreamAllowlist('api.openai.com, *.cometapi.com 127.0.0.1');

describe('upstream URL allowlist', () => {
  it.each([
    ['https://api.openai.com', true],
    ['https://api.openai.com/v1/', true],
    ['https://eu.cometapi.com/v1', true],
    ['https://cometapi.com.evil.example', false],
    ['https://evilcometapi.com', false],
    ['http://127.0.0.1:3010', true],
    ['http://localhost:3010', false],
    ['http://10.0.0.5', false],
    ['http://169.254.169.254/latest/meta-data', false],
    ['http://[::1]:3010', false],
    ['http://[::ffff:127.0.0.1]', false],
    ['https://user:pw@api.openai.com', false],
    ['https://api.openai.com@10.0.0.1', false],
    ['https://api.openai.com/v1?key=x', false],
    ['https://api.openai.com/v1?', false],
    ['https://api.openai.com/#x', false],
    ['ftp://api.openai.com', false],
    ['not a url', false],
  ])('%s → %s', (url, ok) => {
    expect(checkUpstreamUrl(url, allow).ok).toBe(ok);
  });

  it('defaults to the public provider hosts when unset', () => {
    expect(parseUpstreamAllowlist(undefined)).toEqual(['api.openai.com', 'generativelanguage.googleapis.com']);
    expect(checkUpstreamUrl('http://127.0.0.1:3010', parseUpstreamAllowlist('')).ok).toBe(false);
  });

  it('an allowlisted private host is still allowed', () => {
    expect(checkUpstreamUrl('http://[::1]:3010', parseUpstreamAllowlist('[::1]')).ok).toBe(true);
  });

  it.each([
    ['127.0.0.1', true],
    ['10.1.2.3', true],
    ['172.16.0.1', true],
    ['172.32.0.1', false],
    ['192.168.1.1', true],
    ['100.64.0.1', true],
    ['169.254.169.254', true],
    ['0.0.0.0', true],
    ['8.8.8.8', false],
    ['::1', true],
    ['::', true],
    ['fe80::1', true],
    ['fd00::1', true],
    ['::ffff:10.0.0.1', true],
    ['::ffff:8.8.8.8', false],
    ['2001:4860:4860::8888', false],
    ['localhost', true],
    ['api.openai.com', false],
  ])('%s non-public → %s', (host, nonPublic) => {
    expect(isNonPublicAddress(host)).toBe(nonPublic);
  });

  it('judges resolved addresses: public or allowlisted', () => {
    expect(resolvedAddressAllowed('104.18.1.1', allow)).toBe(true);
    expect(resolvedAddressAllowed('10.0.0.7', allow)).toBe(false);
    expect(resolvedAddressAllowed('127.0.0.1', allow)).toBe(true);
  });
});
