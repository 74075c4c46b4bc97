// The web console (issue 13): Preact + htm (no JSX build step beyond esbuild's bundle), vega-embed
// for charts. Every screen calls the services' public APIs through /api/<service>/ with the
// operator token typed in at sign-in; what a role may not do the API refuses, and the refusal
// (its stable code and message) is shown as it came.
import htm from 'htm';
import { h, render } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import embed from 'vega-embed';
import { expressionInterpreter } from 'vega-interpreter';
import { api, ApiError, isWorkloadKey, probeRoles, session } from './api';
import { exposureChart, settledByWorkloadDay, settledChart, usd } from './figures';
import { exposure, ledgerRows } from './spend';

const html = htm.bind(h);

const SCREENS = [
  { id: 'exceptions', title: 'Exceptions', roles: ['operator', 'approver'] },
  { id: 'routes', title: 'Route contracts', roles: ['operator'] },
  { id: 'workloads', title: 'Workloads & keys', roles: ['operator'] },
  { id: 'cases', title: 'Reconciliation', roles: ['operator', 'finance'] },
  { id: 'spend', title: 'Spend', roles: ['operator', 'finance'] },
  { id: 'controls', title: 'Daily controls', roles: ['operator', 'finance'] },
  { id: 'audit', title: 'Weekly audit', roles: ['operator', 'finance'] },
  { id: 'experiments', title: 'Experiments', roles: ['operator'] },
];

const utcDay = (d = new Date()) => d.toISOString().slice(0, 10);

function Problem({ error }) {
  if (!error) return null;
  const code = error instanceof ApiError ? error.code : 'error';
  return html`<div class="error" role="alert" data-code=${code}><strong>${code}</strong>: ${error.message}</div>`;
}

/** Runs `fn` on submit/click, keeping its error (shown) and a busy flag. */
function useAction() {
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const run = async (fn) => {
    setError(null);
    setBusy(true);
    try {
      return await fn();
    } catch (e) {
      setError(e);
      return undefined;
    } finally {
      setBusy(false);
    }
  };
  return { error, busy, run };
}

function useLoad(load, deps) {
  const [state, setState] = useState({ data: null, error: null });
  const [n, setN] = useState(0);
  useEffect(() => {
    let live = true;
    load().then(
      (data) => live && setState({ data, error: null }),
      (error) => live && setState({ data: null, error }),
    );
    return () => {
      live = false;
    };
  }, [...deps, n]);
  return { ...state, reload: () => setN((x) => x + 1) };
}

function SignIn({ onSignedIn }) {
  const [token, setToken] = useState('');
  const { error, busy, run } = useAction();
  const submit = (e) => {
    e.preventDefault();
    run(async () => {
      const t = token.trim();
      if (isWorkloadKey(t)) {
        throw new ApiError(0, 'workload_key_refused', 'This is a workload (app) key. It calls models; the console needs an operator token (npm run operator-token).');
      }
      const roles = await probeRoles(t);
      onSignedIn(t, roles);
    });
  };
  return html`<section class="signin">
    <h2>Sign in</h2>
    <p class="muted">Paste an operator token (roles operator, approver or finance). It is kept in this tab only.</p>
    <form onSubmit=${submit}>
      <label>Operator token <input name="token" type="password" autocomplete="off" value=${token} onInput=${(e) => setToken(e.target.value)} /></label>
      <p><button class="primary" type="submit" disabled=${busy}>Sign in</button></p>
    </form>
    <${Problem} error=${error} />
  </section>`;
}

function Table({ cols, rows, empty = 'nothing yet', testid }) {
  if (!rows || rows.length === 0) return html`<p class="muted">${empty}</p>`;
  return html`<table data-testid=${testid}>
    <thead><tr>${cols.map((c) => html`<th class=${c.num ? 'num' : ''}>${c.title}</th>`)}</tr></thead>
    <tbody>${rows.map((r) => html`<tr>${cols.map((c) => html`<td class=${c.num ? 'num' : ''} data-col=${c.key}>${c.render ? c.render(r) : String(r[c.key] ?? '')}</td>`)}</tr>`)}</tbody>
  </table>`;
}

/** A count distribution ({ omitted: 3, "1": 2 }) as "omitted 3 · 1 2". */
const counts = (d) => (d && Object.keys(d).length ? Object.entries(d).map(([k, v]) => `${k}: ${v}`).join(' · ') : '—');

const badge = (s) => html`<span class="badge ${s}">${s}</span>`;

function Field({ name, label, value, onInput, type = 'text' }) {
  // step="any": a number field takes decimals (an outcome baseline of 0.41); the API validates the rest
  return html`<label>${label}<input name=${name} type=${type} step=${type === 'number' ? 'any' : undefined} value=${value} onInput=${(e) => onInput(name, e.target.value)} /></label>`;
}

function ExceptionForm({ onDone }) {
  const [f, setF] = useState({
    workload_id: '',
    route_id: '',
    owner: '',
    max_candidates: '2',
    per_candidate_output_ceiling: '256',
    budget_microusd: '1000000',
    days: '7',
    justification: '',
    metric: '',
    baseline: '0',
    target: '0',
    expected_requests: '100',
    typical_input_tokens: '500',
  });
  const set = (k, v) => setF((old) => ({ ...old, [k]: v }));
  const { error, busy, run } = useAction();
  const [ok, setOk] = useState(null);
  const submit = (e) => {
    e.preventDefault();
    run(async () => {
      const created = await api('policy', '/exceptions', {
        method: 'POST',
        body: {
          workload_id: f.workload_id,
          route_id: f.route_id,
          owner: f.owner,
          max_candidates: Number(f.max_candidates),
          per_candidate_output_ceiling: Number(f.per_candidate_output_ceiling),
          budget_microusd: f.budget_microusd,
          expires_at: new Date(Date.now() + Number(f.days) * 86400_000).toISOString(),
          justification: f.justification,
          outcome: { metric: f.metric, baseline: Number(f.baseline), target: Number(f.target) },
          expected_requests: Number(f.expected_requests),
          typical_input_tokens: Number(f.typical_input_tokens),
        },
      });
      const projected = created.projection?.at_request;
      setOk(`Requested exception ${created.id} (${created.status}); projected cost ${projected ? usd(projected.cost_microusd) : 'n/a'}.`);
      onDone();
    });
  };
  const fld = (name, label, type) => html`<${Field} name=${name} label=${label} value=${f[name]} onInput=${set} type=${type} />`;
  return html`<section>
    <h2>Request an exception</h2>
    <form class="grid" onSubmit=${submit} data-testid="exception-form">
      ${fld('workload_id', 'Workload')} ${fld('route_id', 'Route')} ${fld('owner', 'Owner')}
      ${fld('max_candidates', 'Max candidates', 'number')} ${fld('per_candidate_output_ceiling', 'Output ceiling per candidate', 'number')}
      ${fld('budget_microusd', 'Budget (micro-USD)')} ${fld('days', 'Expires in (days)', 'number')}
      ${fld('metric', 'Outcome metric')} ${fld('baseline', 'Baseline', 'number')} ${fld('target', 'Target', 'number')}
      ${fld('expected_requests', 'Expected requests', 'number')} ${fld('typical_input_tokens', 'Typical input tokens', 'number')}
      ${fld('justification', 'Justification')}
      <p><button class="primary" type="submit" disabled=${busy}>Request</button></p>
    </form>
    ${ok && html`<div class="ok" role="status">${ok}</div>`}
    <${Problem} error=${error} />
  </section>`;
}

function Exceptions({ roles }) {
  const list = useLoad(() => api('policy', '/exceptions?limit=100'), []);
  const { error, run } = useAction();
  const [done, setDone] = useState(null);
  const decide = (x, decision) =>
    run(async () => {
      // a projection above the budget needs an override reason (the API says so with projection_exceeds_budget)
      const over = decision === 'approve' && x.projection?.at_request?.exceeds_budget;
      const reason = decision === 'reject' ? prompt(`Reject ${x.id}: why?`) : over ? prompt('The projected cost exceeds the budget. Override reason:') : null;
      if (decision === 'reject' && !reason) return;
      const body = decision === 'approve' ? (over && reason ? { override_reason: reason } : {}) : { reason };
      await api('policy', `/exceptions/${x.id}/${decision}`, { method: 'POST', body });
      setDone(`${decision === 'approve' ? 'Approved' : 'Rejected'} ${x.id}.`);
      list.reload();
    });
  const rows = list.data?.exceptions ?? [];
  return html`<div>
    ${roles.includes('operator') && html`<${ExceptionForm} onDone=${list.reload} />`}
    <section>
      <h2>Exception queue</h2>
      <${Problem} error=${list.error || error} />
      ${done && html`<div class="ok" role="status">${done}</div>`}
      <${Table}
        testid="exceptions"
        rows=${rows}
        cols=${[
          { key: 'id', title: 'Id' },
          { key: 'workload_id', title: 'Workload' },
          { key: 'route_id', title: 'Route' },
          { key: 'max_candidates', title: 'Candidates', num: true },
          { key: 'budget_microusd', title: 'Budget', num: true, render: (r) => usd(r.budget_microusd) },
          { key: 'projected', title: 'Projected', num: true, render: (r) => (r.projection?.at_request ? usd(r.projection.at_request.cost_microusd) : '') },
          { key: 'requested_by', title: 'Requested by' },
          { key: 'status', title: 'Status', render: (r) => badge(r.status) },
          { key: 'expires_at', title: 'Expires' },
          {
            key: 'actions',
            title: '',
            render: (r) =>
              r.status === 'requested'
                ? html`<button class="secondary" data-action="approve" data-id=${r.id} onClick=${() => decide(r, 'approve')}>Approve</button>
                    <button class="secondary" data-action="reject" data-id=${r.id} onClick=${() => decide(r, 'reject')}>Reject</button>`
                : '',
          },
        ]}
      />
    </section>
  </div>`;
}

function Routes() {
  const list = useLoad(() => api('policy', '/routes'), []);
  return html`<section>
    <h2>Route contracts</h2>
    <${Problem} error=${list.error} />
    <${Table}
      testid="routes"
      rows=${list.data?.routes}
      cols=${[
        { key: 'id', title: 'Route' },
        { key: 'provider', title: 'Provider', render: (r) => `${r.contract.provider_kind} · ${r.contract.upstream_model}` },
        { key: 'current_version', title: 'Version', num: true },
        { key: 'verification_state', title: 'Verification', render: (r) => badge(r.verification_state) },
        { key: 'verified', title: 'Verified by / at', render: (r) => (r.contract.verified_at ? `${r.contract.verified_by} · ${r.contract.verified_at}` : '—') },
        { key: 'expires', title: 'Expires', render: (r) => r.contract.verification_expires_at ?? '—' },
        { key: 'evidence', title: 'Probe evidence / notes', render: (r) => r.contract.verification_notes ?? '—' },
        { key: 'price', title: 'Price in force', render: (r) => (r.price_in_force ? `from ${r.price_in_force.effective_from}` : 'none') },
      ]}
    />
  </section>`;
}

function Workloads() {
  const [id, setId] = useState('');
  const [wl, setWl] = useState(null);
  const [key, setKey] = useState(null);
  const { error, busy, run } = useAction();
  const load = (e) => {
    e?.preventDefault();
    setKey(null);
    run(async () => setWl(await api('policy', `/workloads/${encodeURIComponent(id.trim())}`)));
  };
  const issue = () => run(async () => setKey(await api('policy', `/workloads/${encodeURIComponent(wl.id)}/keys`, { method: 'POST', body: {} })));
  return html`<section>
    <h2>Workloads and keys</h2>
    <form onSubmit=${load}>
      <label>Workload id <input name="workload" value=${id} onInput=${(e) => setId(e.target.value)} /></label>
      <p><button class="primary" type="submit" disabled=${busy}>Show</button></p>
    </form>
    <${Problem} error=${error} />
    ${wl &&
    html`<div>
      <p><strong>${wl.id}</strong> · team ${wl.team} · ${wl.environment} · default candidates ${wl.default_max_candidates}</p>
      <${Table}
        testid="keys"
        rows=${wl.keys ?? []}
        empty="no keys"
        cols=${[
          { key: 'key_prefix', title: 'Key prefix' },
          { key: 'status', title: 'Status', render: (r) => badge(r.status) },
          { key: 'created_at', title: 'Created' },
          { key: 'created_by', title: 'By' },
        ]}
      />
      <p><button class="secondary" onClick=${issue} disabled=${busy}>Issue a key</button></p>
    </div>`}
    ${key &&
    html`<div class="ok" role="status">
      <p>New key — shown once, copy it now; only its hash is stored:</p>
      <p class="key" data-testid="new-key">${key.key}</p>
    </div>`}
  </section>`;
}

function Cases({ roles }) {
  const [status, setStatus] = useState('open');
  const list = useLoad(() => api('reconciliation', `/cases?status=${status}`), [status]);
  const { error, run } = useAction();
  const [done, setDone] = useState(null);
  const release = (c) =>
    run(async () => {
      const reason = prompt(`Release case ${c.id} without usage evidence. Why?`);
      if (!reason) return;
      await api('reconciliation', `/cases/${c.id}/release`, { method: 'POST', body: { reason } });
      setDone(`Released ${c.id}.`);
      list.reload();
    });
  const [imp, setImp] = useState({ id: '', provider_request_id: '', input_tokens: '0', cached_input_tokens: '0', output_tokens_total: '0', reasoning_tokens: '0' });
  const importUsage = (e) => {
    e.preventDefault();
    run(async () => {
      const { id, provider_request_id, ...counts } = imp;
      const body = { provider_request_id, ...Object.fromEntries(Object.entries(counts).map(([k, v]) => [k, Number(v)])) };
      await api('reconciliation', `/cases/${encodeURIComponent(id)}/import-usage`, { method: 'POST', body });
      setDone(`Imported usage for ${id}.`);
      list.reload();
    });
  };
  const set = (k, v) => setImp((old) => ({ ...old, [k]: v }));
  return html`<div>
    <section>
      <h2>Reconciliation cases</h2>
      <label>Status <select value=${status} onChange=${(e) => setStatus(e.target.value)}>${['open', 'resolved', 'all'].map((s) => html`<option>${s}</option>`)}</select></label>
      <${Problem} error=${list.error || error} />
      ${done && html`<div class="ok" role="status">${done}</div>`}
      <${Table}
        testid="cases"
        rows=${list.data?.cases}
        empty="no cases"
        cols=${[
          { key: 'id', title: 'Case' },
          { key: 'workload_id', title: 'Workload' },
          { key: 'reason', title: 'Reason' },
          { key: 'status', title: 'Status', render: (r) => badge(r.status) },
          { key: 'unresolved_microusd', title: 'Unresolved', num: true, render: (r) => (r.unresolved_microusd ? usd(r.unresolved_microusd) : '') },
          { key: 'opened_at', title: 'Opened' },
          { key: 'act', title: '', render: (r) => (r.status === 'open' && roles.includes('operator') ? html`<button class="secondary" onClick=${() => release(r)}>Release</button>` : '') },
        ]}
      />
    </section>
    <section>
      <h2>Import provider usage for a case</h2>
      <form class="grid" onSubmit=${importUsage}>
        ${['id', 'provider_request_id', 'input_tokens', 'cached_input_tokens', 'output_tokens_total', 'reasoning_tokens'].map(
          (k) => html`<${Field} name=${k} label=${k === 'id' ? 'Case id' : k} value=${imp[k]} onInput=${set} />`,
        )}
        <p><button class="primary" type="submit">Import</button></p>
      </form>
    </section>
  </div>`;
}

function Chart({ spec, testid }) {
  const ref = useRef(null);
  useEffect(() => {
    let view;
    // The AST interpreter instead of vega's generated functions: the page's CSP has no unsafe-eval.
    embed(ref.current, spec, { actions: false, ast: true, expr: expressionInterpreter, renderer: 'svg' }).then((r) => (view = r.view));
    return () => view?.finalize();
  }, [JSON.stringify(spec)]);
  return html`<div ref=${ref} data-testid=${testid} style="width: 100%"></div>`;
}

function Spend() {
  const [days, setDays] = useState('7');
  const load = useLoad(async () => {
    const to = new Date(Date.now() + 60_000);
    const from = new Date(Date.parse(`${utcDay()}T00:00:00Z`) - (Number(days) - 1) * 86400_000);
    const [ledger, accounts] = await Promise.all([ledgerRows(from.toISOString(), to.toISOString()), exposure()]);
    return { points: settledByWorkloadDay(ledger.rows), complete: ledger.complete, accounts };
  }, [days]);
  const d = load.data;
  return html`<div>
    <section>
      <h2>Spend by workload and day</h2>
      <label>Days <select value=${days} onChange=${(e) => setDays(e.target.value)}>${['1', '7', '30'].map((n) => html`<option>${n}</option>`)}</select></label>
      <${Problem} error=${load.error} />
      ${d && !d.complete && html`<p class="error">More ledger rows than this screen reads: the totals below are partial.</p>`}
      ${d &&
      html`<div>
        <${Chart} spec=${settledChart(d.points)} testid="settled-chart" />
        <${Table}
          testid="settled"
          rows=${d.points}
          empty="no settled spend in these days"
          cols=${[
            { key: 'day', title: 'UTC day' },
            { key: 'workload_id', title: 'Workload' },
            { key: 'attempts', title: 'Attempts', num: true },
            { key: 'settled_microusd', title: 'Settled (micro-USD)', num: true },
            { key: 'usd', title: 'Settled', num: true, render: (r) => usd(r.settled_microusd) },
          ]}
        />
      </div>`}
    </section>
    ${d &&
    html`<section>
      <h2>Exposure now</h2>
      <${Chart} spec=${exposureChart(d.accounts)} testid="exposure-chart" />
      <${Table}
        testid="exposure"
        rows=${d.accounts}
        cols=${[
          { key: 'scope', title: 'Scope', render: (r) => `${r.scope} ${r.scope_id}` },
          { key: 'settled_microusd', title: 'Settled', num: true },
          { key: 'unresolved_microusd', title: 'Unresolved', num: true },
          { key: 'pending_microusd', title: 'Reserved', num: true },
          { key: 'budget_microusd', title: 'Budget', num: true },
        ]}
      />
    </section>`}
  </div>`;
}

function Controls() {
  const [day, setDay] = useState(utcDay());
  const report = useLoad(() => api('reconciliation', `/controls/days/${day}`), [day]);
  const alerts = useLoad(() => api('reconciliation', '/controls/alerts'), []);
  return html`<div>
    <section>
      <h2>Alerts</h2>
      <${Problem} error=${alerts.error} />
      <${Table}
        testid="alerts"
        rows=${alerts.data?.alerts}
        empty="no alerts"
        cols=${[
          { key: 'day', title: 'Day' },
          { key: 'kind', title: 'Kind' },
          { key: 'workload_id', title: 'Workload' },
          { key: 'route_id', title: 'Route' },
          { key: 'detail', title: 'Detail', render: (r) => JSON.stringify(r.detail ?? r.evidence ?? {}) },
        ]}
      />
    </section>
    <section>
      <h2>Daily controls</h2>
      <label>UTC day <input type="date" value=${day} onChange=${(e) => setDay(e.target.value)} /></label>
      <${Problem} error=${report.error} />
      ${report.data &&
      html`<div data-testid="controls-day">
        <${Table}
          testid="controls-routes"
          rows=${report.data.routes}
          empty="no traffic on this day"
          cols=${[
            { key: 'workload_id', title: 'Workload' },
            { key: 'route_id', title: 'Route' },
            { key: 'requested_counts', title: 'Requested counts', render: (r) => counts(r.requested_counts) },
            { key: 'baseline_requested_counts', title: '7-day baseline', render: (r) => counts(r.baseline_requested_counts) },
            { key: 'effective_counts', title: 'Effective counts', render: (r) => counts(r.effective_counts) },
            { key: 'admitted', title: 'Admitted', num: true },
            { key: 'refused', title: 'Refused', num: true },
            { key: 'output_tokens_per_request', title: 'Output / request', render: (r) => (r.output_tokens_per_request ? JSON.stringify(r.output_tokens_per_request) : '—') },
          ]}
        />
        <details><summary>The day's full report (JSON)</summary><pre>${JSON.stringify(report.data, null, 2)}</pre></details>
      </div>`}
    </section>
  </div>`;
}

/** `GET /audit` as two tables: the figures per workload × route side by side, then every difference, one line each. */
function Audit() {
  const today = utcDay();
  const [form, setForm] = useState({ from: utcDay(new Date(Date.now() - 6 * 86_400_000)), to: today, workload: '' });
  // every press of "Run the audit" runs it again, the same period too (the topic side may have caught up)
  const [query, setQuery] = useState({ ...form, run: 0 });
  const report = useLoad(() => {
    const q = new URLSearchParams({ from: query.from, to: query.to });
    if (query.workload.trim()) q.set('workload_id', query.workload.trim());
    return api('reconciliation', `/audit?${q}`);
  }, [query.from, query.to, query.workload, query.run]);
  const set = (name, value) => setForm({ ...form, [name]: value });
  return html`<section>
    <h2>Weekly audit</h2>
    <p class="muted">Ledger, the settled topic as reconciliation received it, and imported provider exports side by side; disagreements are listed one by one, never netted.</p>
    <form onSubmit=${(e) => (e.preventDefault(), setQuery({ ...form, run: query.run + 1 }))}>
      <label>From (UTC) <input name="from" type="date" value=${form.from} onChange=${(e) => set('from', e.target.value)} /></label>
      <label>To (UTC) <input name="to" type="date" value=${form.to} onChange=${(e) => set('to', e.target.value)} /></label>
      <${Field} name="workload" label="Workload id (optional)" value=${form.workload} onInput=${set} />
      <p><button class="primary" type="submit">Run the audit</button></p>
    </form>
    <${Problem} error=${report.error} />
    ${report.data &&
    html`<div data-testid="audit">
      <${Table}
        testid="audit-rows"
        rows=${report.data.rows}
        empty="nothing in this period"
        cols=${[
          { key: 'workload_id', title: 'Workload', render: (r) => r.workload_id || '(no attempt)' },
          { key: 'route_id', title: 'Route' },
          { key: 'reservations', title: 'Reservations made / settled / released / unresolved', render: (r) => `${r.reservations.made} / ${r.reservations.settled} / ${r.reservations.released} / ${r.reservations.unresolved}` },
          { key: 'ledger_microusd', title: 'Ledger µUSD', num: true, render: (r) => r.ledger.cost_microusd },
          { key: 'topic_microusd', title: 'Settled topic µUSD', num: true, render: (r) => r.topic.cost_microusd },
          { key: 'export_microusd', title: 'Export µUSD', num: true, render: (r) => r.export?.cost_microusd ?? '—' },
          { key: 'requested', title: 'Requested counts', render: (r) => counts(r.counts.requested) },
          { key: 'returned_total', title: 'Effective / returned', render: (r) => `${r.counts.effective_total} / ${r.counts.returned_total}` },
          { key: 'output', title: 'Output / request (p50, p95)', render: (r) => (r.output_per_request ? `${r.output_per_request.p50}, ${r.output_per_request.p95}` : '—') },
          { key: 'differences', title: 'Differences', num: true },
        ]}
      />
      <h3>Differences${report.data.differences_truncated ? ' (truncated)' : ''}</h3>
      <${Table}
        testid="audit-differences"
        rows=${report.data.differences}
        empty="no differences"
        cols=${[
          { key: 'kind', title: 'Kind' },
          { key: 'workload_id', title: 'Workload' },
          { key: 'route_id', title: 'Route' },
          { key: 'attempt_id', title: 'Attempt' },
          { key: 'ids', title: 'Event / line / reservation', render: (r) => r.event_id ?? r.provider_request_id ?? r.reservation_id ?? '' },
          { key: 'ledger_microusd', title: 'Ledger µUSD', num: true },
          { key: 'other', title: 'Other side µUSD', num: true, render: (r) => r.topic_microusd ?? r.export_microusd ?? r.unresolved_microusd ?? '' },
        ]}
      />
    </div>`}
  </section>`;
}

function Experiments() {
  const [wl, setWl] = useState('');
  const [list, setList] = useState(null);
  const [reportOf, setReport] = useState(null);
  const { error, busy, run } = useAction();
  const load = (e) => {
    e.preventDefault();
    setReport(null);
    run(async () => setList(await api('policy', `/workloads/${encodeURIComponent(wl.trim())}/experiments`)));
  };
  const show = (id) => run(async () => setReport(await api('policy', `/experiments/${encodeURIComponent(id)}/report`)));
  return html`<section>
    <h2>Experiment report</h2>
    <form onSubmit=${load}>
      <label>Workload id <input name="workload" value=${wl} onInput=${(e) => setWl(e.target.value)} /></label>
      <p><button class="primary" type="submit" disabled=${busy}>List experiments</button></p>
    </form>
    <${Problem} error=${error} />
    ${list &&
    html`<${Table}
      rows=${list.experiments}
      empty="no experiments"
      cols=${[
        { key: 'id', title: 'Experiment' },
        { key: 'status', title: 'Status', render: (r) => badge(r.status) },
        { key: 'started_at', title: 'Started' },
        { key: 'r', title: '', render: (r) => html`<button class="secondary" onClick=${() => show(r.id)}>Report</button>` },
      ]}
    />`}
    ${reportOf && html`<pre data-testid="experiment-report">${JSON.stringify(reportOf, null, 2)}</pre>`}
  </section>`;
}

const VIEWS = { exceptions: Exceptions, routes: Routes, workloads: Workloads, cases: Cases, spend: Spend, controls: Controls, audit: Audit, experiments: Experiments };

function App() {
  const [auth, setAuth] = useState(null);
  const [screen, setScreen] = useState(null);
  const [restoring, setRestoring] = useState(Boolean(session.token));
  const signedIn = (token, roles) => {
    session.set(token);
    setAuth({ roles });
    setScreen(SCREENS.find((s) => s.roles.some((r) => roles.includes(r))).id);
  };
  useEffect(() => {
    if (!session.token) return;
    probeRoles(session.token).then(
      (roles) => signedIn(session.token, roles),
      () => session.set(''),
    ).finally(() => setRestoring(false));
  }, []);
  if (restoring) return html`<p class="muted">…</p>`;
  if (!auth) return html`<header><h1>Spend-control console</h1></header><main><${SignIn} onSignedIn=${signedIn} /></main>`;
  const allowed = SCREENS.filter((s) => s.roles.some((r) => auth.roles.includes(r)));
  const View = VIEWS[screen];
  return html`<header>
      <h1>Spend-control console</h1>
      <nav>${allowed.map((s) => html`<button class=${s.id === screen ? 'active' : ''} data-screen=${s.id} onClick=${() => setScreen(s.id)}>${s.title}</button>`)}</nav>
      <span class="who" data-testid="roles">${auth.roles.join(', ')}</span>
      <button class="secondary" onClick=${() => (session.set(''), setAuth(null))}>Sign out</button>
    </header>
    <main><${View} roles=${auth.roles} /></main>`;
}

render(html`<${App} />`, document.getElementById('app'));
