import type { ProbeObservation } from '../../probe/route-probe';

export interface ProbeVerdict {
  passed: boolean;
  problems: string[];
}

/**
 * A route passes the probe when the upstream answered 2xx with exactly the candidates asked for
 * and aggregate usage, and the visible output stays within what the declared cap semantics allow
 * (a route declared `shared` that caps per candidate would make reservations too small).
 */
export function probeVerdict(o: ProbeObservation, semantics: string | null): ProbeVerdict {
  const problems: string[] = [];
  if (o.http_status === null) problems.push(`no answer from the upstream (${o.provider_error ?? 'no response'})`);
  else if (o.http_status >= 400)
    problems.push(`upstream answered HTTP ${o.http_status}${o.provider_error ? ` (${o.provider_error})` : ''}`);
  else {
    if (o.returned_candidates !== o.requested_candidates) {
      problems.push(
        `asked for ${o.requested_candidates} candidates, got ${o.returned_candidates ?? 0}${o.prompt_block_reason ? ` (prompt blocked: ${o.prompt_block_reason})` : ''}`,
      );
    }
    if (!o.usage_present) problems.push('response carried no aggregate usage');
    if (o.output_tokens_total !== null && semantics !== null) {
      const visible = o.output_tokens_total - (o.reasoning_tokens ?? 0);
      const bound = semantics === 'shared' ? o.output_cap : o.output_cap * o.requested_candidates;
      if (visible > bound)
        problems.push(`output of ${visible} tokens exceeds the ${bound} the declared '${semantics}' cap semantics allow`);
    }
  }
  return { passed: problems.length === 0, problems };
}
