import type { ProbeObservation } from '../../probe/route-probe';
import { probeVerdict } from './probe-verdict';

const ok: ProbeObservation = {
  action_id: 'act-probe-1',
  attempt_id: 'att-probe-1',
  reserved_microusd: '120',
  requested_candidates: 2,
  output_cap: 16,
  http_status: 200,
  provider_error: null,
  returned_candidates: 2,
  usage_present: true,
  input_tokens: 12,
  output_tokens_total: 20,
  reasoning_tokens: 0,
  provider_request_id: 'req_1',
  prompt_block_reason: null,
  duration_ms: 5,
};

describe('probeVerdict', () => {
  it.each<[string, Partial<ProbeObservation>, string | null, boolean, RegExp | null]>([
    ['2 candidates with usage', {}, 'per_candidate', true, null],
    ['undocumented semantics skips the cap check', { output_tokens_total: 100 }, null, true, null],
    ['one candidate silently served', { returned_candidates: 1 }, 'per_candidate', false, /asked for 2 candidates, got 1/],
    ['more than asked', { returned_candidates: 3 }, 'per_candidate', false, /got 3/],
    ['no usage', { usage_present: false, output_tokens_total: null }, 'per_candidate', false, /no aggregate usage/],
    [
      '400 on n>1',
      { http_status: 400, provider_error: 'invalid_value', returned_candidates: null, usage_present: false },
      'per_candidate',
      false,
      /HTTP 400 \(invalid_value\)/,
    ],
    [
      'unreachable',
      { http_status: null, provider_error: 'connection_failed' },
      'per_candidate',
      false,
      /no answer from the upstream \(connection_failed\)/,
    ],
    ['per-candidate cap exceeded', { output_tokens_total: 33 }, 'per_candidate', false, /33 tokens exceeds the 32/],
    ['shared cap exceeded', { output_tokens_total: 20 }, 'shared', false, /20 tokens exceeds the 16/],
    ['reasoning does not count against the visible cap', { output_tokens_total: 40, reasoning_tokens: 10 }, 'per_candidate', true, null],
    [
      'blocked prompt is named',
      { returned_candidates: 0, prompt_block_reason: 'SAFETY' },
      'per_candidate',
      false,
      /prompt blocked: SAFETY/,
    ],
  ])('%s', (_name, change, semantics, passed, problem) => {
    const v = probeVerdict({ ...ok, ...change }, semantics);
    expect(v.passed).toBe(passed);
    if (problem) expect(v.problems.join('; ')).toMatch(problem);
    else expect(v.problems).toEqual([]);
  });
});
