'use strict';
// A minimal Prisma generator used by prisma-dmmf.ts: the Prisma CLI starts it, sends JSON-RPC
// requests on stdin (one per line) and reads the answers from stderr. On `generate` it writes the
// DMMF datamodel Prisma computed from the schema to the file named by DMMF_DUMP_OUT.
const fs = require('node:fs');
const readline = require('node:readline');

const out = process.env.DMMF_DUMP_OUT;

function reply(id, payload) {
  process.stderr.write(`${JSON.stringify({ jsonrpc: '2.0', id, ...payload })}\n`);
}

readline.createInterface({ input: process.stdin }).on('line', (line) => {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return;
  }
  try {
    if (msg.method === 'getManifest') {
      reply(msg.id, { result: { manifest: { prettyName: 'DMMF dump (schema test)', requiresEngines: [] } } });
    } else if (msg.method === 'generate') {
      if (!out) throw new Error('DMMF_DUMP_OUT is not set');
      fs.writeFileSync(out, JSON.stringify(msg.params.dmmf.datamodel));
      reply(msg.id, { result: null });
    } else {
      reply(msg.id, { error: { code: -32601, message: `unknown method ${msg.method}` } });
    }
  } catch (err) {
    reply(msg.id, { error: { code: -32000, message: String(err && err.stack ? err.stack : err) } });
  }
});
