#!/usr/bin/env node
// `npm run report -- <command>`: finance and operator reports against a running stack.
//   import <file> [--format=jsonl|csv]   import a provider usage export (docs/usage-exports.md) through
//                                        POST /usage-exports, in parts of at most 2,000 lines, and
//                                        print what became of it (resolved / confirmed / mismatch /
//                                        pending / unmatched / refused / invalid); --json prints the
//                                        merged report as JSON.
// Environment: GATEWAY_OPERATOR_TOKEN (the operator or finance token `npm start` prints),
// RECONCILIATION_URL (default: the stack's reconciliation port).
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
  const lines = text.split(/\r?\n/);
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
  for (const part of parts(format, fs.readFileSync(file, 'utf8'))) {
    const r = await post(`${base}/usage-exports`, token, { format, content: part.content });
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
  if ((c.unmatched ?? 0) + (c.mismatch ?? 0) + (c.refused ?? 0) + (c.invalid ?? 0) > 0) process.exitCode = 1;
}

switch (command) {
  case 'import':
    await importExport();
    break;
  default:
    fail('commands: import <file>');
}
