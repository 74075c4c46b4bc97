#!/usr/bin/env node
// `npm run report -- <command>`: finance and operator reports against a running stack.
//   import <file> [--format=jsonl|csv]   import a provider usage export (docs/usage-exports.md) through
//                                        POST /usage-exports, in parts of at most 2,000 lines, and
//                                        print what became of it (resolved / confirmed / mismatch /
//                                        pending / unmatched / refused / invalid); --json prints the
//                                        merged report as JSON.
//          [--complete=YYYY-MM-DD --routes=a,b]
//                                        also state that the file is the provider's complete export
//                                        for those routes and UTC day (sent with the last part, with
//                                        the file's sha256): their attempts of that day left
//                                        unresolved with no line are settled at zero.
//   experiment <id> [--csv] [--chart=out.svg] [--from=report.json]
//                                        a hedging experiment's report (GET /experiments/{id}/report):
//                                        JSON, or CSV with --csv; --chart writes an SVG (vega-lite,
//                                        rendered headless) of each cohort's on-time rate and the rate
//                                        difference with its 95 % interval; --from reads a saved JSON
//                                        report instead of the API (e.g. one finance rebuilt).
//   audit --from YYYY-MM-DD --to YYYY-MM-DD [--workload ID] [--csv|--json]
//                                        the weekly audit (GET /audit): per workload × route the
//                                        reservations, ledger, settled-topic and export totals and
//                                        every difference listed; JSON (default) or the API's CSV;
//                                        exit code 1 when any difference is listed.
// Environment: GATEWAY_OPERATOR_TOKEN (the operator or finance token `npm start` prints),
// RECONCILIATION_URL, POLICY_URL (default: the stack's ports).
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { portOf, SERVICES } from './services.mjs';

const PART_LINES = 2_000;
const [command, ...rest] = process.argv.slice(2);
const flags = Object.fromEntries(rest.filter((a) => a.startsWith('--')).map((a) => a.slice(2).split('=')));
const args = rest.filter((a) => !a.startsWith('--'));

function fail(message) {
  console.error(`report: ${message}`);
  process.exit(2);
}

async function post(url, token, body) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = await res.json().catch(() => null);
  if (!res.ok) fail(`${res.status} ${json?.error?.code ?? ''}: ${json?.error?.message ?? 'request failed'}`);
  return json;
}

/** The file in parts of at most PART_LINES lines; a CSV part repeats the header; line numbers are shifted back. */
function parts(format, text) {
  // a final newline ends the last line, it does not start an empty part
  const lines = text.replace(/\r?\n$/, '').split(/\r?\n/);
  if (format === 'jsonl') {
    const out = [];
    for (let i = 0; i < lines.length; i += PART_LINES) out.push({ offset: i, content: lines.slice(i, i + PART_LINES).join('\n') });
    return out;
  }
  const [header, ...body] = lines;
  const out = [];
  for (let i = 0; i < body.length; i += PART_LINES) out.push({ offset: i, content: [header, ...body.slice(i, i + PART_LINES)].join('\n') });
  return out;
}

async function importExport() {
  const file = args[0];
  if (!file) fail('usage: npm run report -- import <file> [--format=jsonl|csv] [--json]');
  const format = flags.format ?? (/\.(jsonl|ndjson)$/i.test(file) ? 'jsonl' : /\.csv$/i.test(file) ? 'csv' : null);
  if (format !== 'jsonl' && format !== 'csv') fail('name the format: --format=jsonl or --format=csv');
  const token = process.env.GATEWAY_OPERATOR_TOKEN ?? fail('set GATEWAY_OPERATOR_TOKEN (npm start prints one)');
  const base = process.env.RECONCILIATION_URL ?? `http://127.0.0.1:${portOf(SERVICES.find((s) => s.name === 'reconciliation'))}`;
  const merged = {
    file: path.resolve(file),
    format,
    lines: 0,
    counts: {},
    export_cost_microusd: 0n,
    ledger_cost_microusd: 0n,
    unmatched_tokens: { input: 0, output: 0 },
    invalid: [],
    results: [],
  };
  if ('complete' in flags !== 'routes' in flags) fail('--complete=YYYY-MM-DD and --routes=a,b go together');
  const text = fs.readFileSync(file, 'utf8');
  const complete = flags.complete
    ? {
        day: flags.complete,
        routes: flags.routes.split(',').filter(Boolean),
        export_digest: `sha256:${createHash('sha256').update(text).digest('hex')}`,
      }
    : null;
  const all = parts(format, text);
  for (const [i, part] of all.entries()) {
    // the statement goes with the last part: by then every line of the file has been imported
    const last = i === all.length - 1;
    // an invalid line may be the one naming an attempt: never state complete an export that has one
    const stating = complete && last && merged.invalid.length === 0;
    if (complete && last && !stating) console.error(`report: not stating the export complete: ${merged.invalid.length} invalid line(s)`);
    const r = await post(`${base}/usage-exports`, token, { format, content: part.content, ...(stating ? { complete } : {}) });
    if (r.completion) merged.completion = r.completion;
    merged.lines += r.lines;
    for (const [k, v] of Object.entries(r.counts)) merged.counts[k] = (merged.counts[k] ?? 0) + v;
    merged.export_cost_microusd += BigInt(r.export_cost_microusd);
    merged.ledger_cost_microusd += BigInt(r.ledger_cost_microusd);
    merged.unmatched_tokens.input += r.unmatched_tokens.input;
    merged.unmatched_tokens.output += r.unmatched_tokens.output;
    merged.invalid.push(...r.invalid.map((i) => ({ ...i, line: i.line + part.offset })));
    merged.results.push(...r.results.map((x) => ({ ...x, line: x.line + part.offset })));
  }
  if ('json' in flags) {
    console.log(JSON.stringify(merged, (_k, v) => (typeof v === 'bigint' ? v.toString() : v), 2));
    return;
  }
  const c = merged.counts;
  console.log(`${merged.file} (${format}, ${merged.lines} lines)`);
  console.log(
    `  unmatched (spend the gateway never saw): ${c.unmatched ?? 0}  tokens in ${merged.unmatched_tokens.input} / out ${merged.unmatched_tokens.output}`,
  );
  console.log(
    `  resolved ${c.resolved ?? 0}  confirmed ${c.confirmed ?? 0}  mismatch ${c.mismatch ?? 0}  pending ${c.pending ?? 0}  refused ${c.refused ?? 0}  invalid ${c.invalid ?? 0}`,
  );
  console.log(`  matched lines: export ${merged.export_cost_microusd} micro-USD, ledger ${merged.ledger_cost_microusd} micro-USD`);
  for (const r of merged.results.filter((x) => x.outcome === 'unmatched' || x.outcome === 'mismatch' || x.outcome === 'refused')) {
    console.log(
      `  line ${r.line}: ${r.outcome} ${r.provider_request_id}${r.case_id ? ` case ${r.case_id}` : ''}${r.detail ? ` (${r.detail})` : ''}`,
    );
  }
  for (const i of merged.invalid) console.log(`  line ${i.line}: invalid ${i.param ? `${i.param}: ` : ''}${i.message}`);
  const done = merged.completion;
  if (done) {
    console.log(
      `  stated complete for ${done.day} (${done.route_ids.join(', ')}; statement ${done.statement_id} by ${done.stated_by} at ${done.stated_at}, ${done.export_digest})`,
    );
    console.log(
      `  settled at zero (no line): ${done.settled_at_zero.length}  within the ${done.grace_ms} ms grace: ${done.within_grace}  refused ${done.refused.length}`,
    );
    for (const a of done.settled_at_zero) console.log(`  attempt ${a.attempt_id}: settled at zero (case ${a.case_id}, ${a.case_reason})`);
    for (const a of done.refused) console.log(`  attempt ${a.attempt_id}: refused (${a.detail})`);
  }
  if ((c.unmatched ?? 0) + (c.mismatch ?? 0) + (c.refused ?? 0) + (c.invalid ?? 0) > 0) process.exitCode = 1;
}

async function experimentReport() {
  const id = args[0];
  if (!id && !flags.from) fail('usage: npm run report -- experiment <id> [--csv] [--chart=out.svg] [--from=report.json]');
  let report;
  if (flags.from) {
    report = JSON.parse(fs.readFileSync(flags.from, 'utf8'));
  } else {
    const token = process.env.GATEWAY_OPERATOR_TOKEN ?? fail('set GATEWAY_OPERATOR_TOKEN (npm start prints one)');
    const base = process.env.POLICY_URL ?? `http://127.0.0.1:${portOf(SERVICES.find((s) => s.name === 'policy'))}`;
    const get = async (format) => {
      const res = await fetch(`${base}/experiments/${encodeURIComponent(id)}/report?format=${format}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      if (!res.ok) {
        const json = await res.json().catch(() => null);
        fail(`${res.status} ${json?.error?.code ?? ''}: ${json?.error?.message ?? 'request failed'}`);
      }
      return format === 'csv' ? res.text() : res.json();
    };
    if ('csv' in flags && !flags.chart) {
      process.stdout.write(await get('csv'));
      return;
    }
    report = await get('json');
  }
  if (flags.chart) {
    fs.writeFileSync(flags.chart, await experimentChart(report));
    console.error(`report: chart written to ${path.resolve(flags.chart)}`);
  }
  if ('csv' in flags && flags.from) fail('--csv reads the API; with --from, the JSON is printed');
  if (!('csv' in flags)) console.log(JSON.stringify(report, null, 2));
}

/** The report's chart as SVG: vega-lite compiled to vega, rendered without a browser or canvas. */
async function experimentChart(r) {
  const [vega, vl] = await Promise.all([import('vega'), import('vega-lite')]);
  const cohorts = ['hedged', 'holdout'].map((c) => ({ cohort: c, rate: r.cohorts[c].on_time_rate ?? 0, n: r.cohorts[c].eligible_actions }));
  const d = r.on_time_rate_difference;
  const diff = d ? [{ what: 'hedged − holdout', estimate: d.estimate, low: d.interval_95[0], high: d.interval_95[1] }] : [];
  const pauses = r.pauses ?? [];
  const paused = r.paused_actions ?? { hedged: 0, holdout: 0 };
  const spec = vl.compile({
    title: {
      text: `experiment ${r.experiment_id}: ${r.verdict}${r.verdict_reason ? ` (${r.verdict_reason})` : ''}`,
      // a pause runs hedged actions primary-only; they still count in their cohort (intention to treat)
      subtitle: `hedging paused ${pauses.length} time(s)${pauses.some((p) => p.ended_at === null) ? ', paused now' : ''}; actions run paused: hedged ${paused.hedged}, holdout ${paused.holdout}`,
    },
    vconcat: [
      {
        width: 420,
        title: `on-time valid answers within ${r.useful_deadline_ms} ms`,
        data: { values: cohorts },
        mark: 'bar',
        encoding: {
          y: { field: 'cohort', type: 'nominal', title: null },
          x: { field: 'rate', type: 'quantitative', title: 'on-time rate', scale: { domain: [0, 1] } },
          tooltip: [{ field: 'n', title: 'eligible actions' }],
        },
      },
      {
        width: 420,
        title: 'difference in on-time rate, 95 % bootstrap interval',
        data: { values: diff },
        layer: [
          {
            mark: 'rule',
            encoding: {
              y: { field: 'what', type: 'nominal', title: null },
              x: { field: 'low', type: 'quantitative', title: 'rate difference' },
              x2: { field: 'high' },
            },
          },
          {
            mark: { type: 'point', filled: true },
            encoding: { y: { field: 'what', type: 'nominal' }, x: { field: 'estimate', type: 'quantitative' } },
          },
          {
            data: { values: [{ zero: 0 }] },
            mark: { type: 'rule', strokeDash: [4, 4] },
            encoding: { x: { field: 'zero', type: 'quantitative' } },
          },
        ],
      },
    ],
  }).spec;
  return new vega.View(vega.parse(spec), { renderer: 'none' }).toSVG();
}

/** `--name=value` or `--name value`. */
function option(name) {
  if (typeof flags[name] === 'string') return flags[name];
  const i = rest.indexOf(`--${name}`);
  return i >= 0 && rest[i + 1] && !rest[i + 1].startsWith('--') ? rest[i + 1] : undefined;
}

async function auditReport() {
  const from = option('from');
  const to = option('to');
  if (!from || !to) fail('usage: npm run report -- audit --from YYYY-MM-DD --to YYYY-MM-DD [--workload ID] [--csv|--json]');
  if ('csv' in flags && 'json' in flags) fail('choose one of --csv and --json');
  const token = process.env.GATEWAY_OPERATOR_TOKEN ?? fail('set GATEWAY_OPERATOR_TOKEN (npm start prints one)');
  const base = process.env.RECONCILIATION_URL ?? `http://127.0.0.1:${portOf(SERVICES.find((s) => s.name === 'reconciliation'))}`;
  const query = new URLSearchParams({ from, to });
  const workload = option('workload');
  if (workload) query.set('workload_id', workload);
  const get = async (format) => {
    query.set('format', format);
    const res = await fetch(`${base}/audit?${query}`, { headers: { authorization: `Bearer ${token}` } });
    if (!res.ok) {
      const json = await res.json().catch(() => null);
      fail(`${res.status} ${json?.error?.code ?? ''}: ${json?.error?.message ?? 'request failed'}`);
    }
    return res.text();
  };
  const text = await get('csv' in flags ? 'csv' : 'json');
  if ('csv' in flags) {
    process.stdout.write(text);
    // the CSV's second table: a header and one line per difference
    const differences =
      text
        .split('\r\n\r\n')[1]
        ?.split('\r\n')
        .filter((l) => l !== '') ?? [];
    if (differences.length > 1) process.exitCode = 1;
    return;
  }
  const report = JSON.parse(text);
  console.log(JSON.stringify(report, null, 2));
  if (report.differences.length > 0) process.exitCode = 1;
}

switch (command) {
  case 'audit':
    await auditReport();
    break;
  case 'import':
    await importExport();
    break;
  case 'experiment':
    await experimentReport();
    break;
  default:
    fail('commands: import <file>, experiment <id>, audit --from … --to …');
}
