// The measurements of `npm run bench -- --soak` (scripts/bench.mjs): whether a service's memory
// grows with the answers it has served. The figure that says so is the heap each service keeps
// after a full garbage collection, before and after the soak (`heapAfterFullGc`). The heap sampled
// during the soak (its lowest per window, `troughs`) also holds garbage not collected yet: in a
// process that allocates little, V8 runs one full collection in ten minutes and its troughs climb
// all the while (policy's did, 45.5 → 50.2 MB, on 2026-12-07).
import WebSocket from 'ws';

const round = (n, digits) => Math.round(n * 10 ** digits) / 10 ** digits;

/**
 * The lowest value of `field` per service over `samples` (each `{ [service]: { [field]: MB } }`,
 * as bench.mjs's `memory()` returns them); services or samples without the field are skipped.
 */
export function troughs(samples, field = 'heapUsed') {
  const out = {};
  for (const sample of samples)
    for (const [service, m] of Object.entries(sample ?? {})) {
      const v = m?.[field];
      if (typeof v === 'number' && Number.isFinite(v)) out[service] = Math.min(out[service] ?? Infinity, v);
    }
  return out;
}

/**
 * What a service's heap after a full collection gained between two measurements (`startMb`,
 * `endMb`) over `answers` served: KB per 1,000 answers, and what that comes to in a day at
 * `ratePerS`. Null without both measurements or without answers.
 */
export function fullGcGrowth(startMb, endMb, answers, ratePerS) {
  if (typeof startMb !== 'number' || typeof endMb !== 'number' || !(answers > 0)) return null;
  const mbPerAnswer = (endMb - startMb) / answers;
  return { kbPer1000Answers: round(mbPerAnswer * 1024 * 1000, 2), mbPerDay: round(mbPerAnswer * ratePerS * 86_400, 1) };
}

/**
 * The heap a running node process `pid` keeps after a full garbage collection, in MB: the process's
 * inspector is opened (SIGUSR1, on 127.0.0.1:`port`), asked for a full collection and the heap in
 * use, and closed again, so the next process can open its own on the same port. A heap sampled
 * between collections counts the garbage V8 has not collected yet: in a process that allocates
 * little, one full collection in ten minutes, and its troughs climb without a leak.
 */
export async function heapAfterFullGc(pid, { port = 9229, timeoutMs = 15_000 } = {}) {
  const list = `http://127.0.0.1:${port}/json/list`;
  const until = Date.now() + timeoutMs;
  process.kill(pid, 'SIGUSR1');
  let url;
  while (!url) {
    url = await fetch(list)
      .then((r) => r.json())
      .then((targets) => targets[0]?.webSocketDebuggerUrl)
      .catch(() => undefined);
    if (!url) {
      if (Date.now() > until) throw new Error(`process ${pid} opened no inspector on port ${port}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const ws = new WebSocket(url);
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  let id = 0;
  const waiting = new Map();
  ws.on('message', (data) => {
    const m = JSON.parse(String(data));
    waiting.get(m.id)?.(m);
    waiting.delete(m.id);
  });
  const call = (method, params = {}) =>
    new Promise((resolve, reject) => {
      const n = ++id;
      const timer = setTimeout(() => reject(new Error(`${method}: no answer from process ${pid}`)), timeoutMs);
      waiting.set(n, (m) => {
        clearTimeout(timer);
        if (m.error) reject(new Error(`${method}: ${m.error.message}`));
        else resolve(m.result);
      });
      ws.send(JSON.stringify({ id: n, method, params }));
    });
  try {
    await call('HeapProfiler.collectGarbage');
    const { usedSize } = await call('Runtime.getHeapUsage');
    return round(usedSize / 1024 / 1024, 1);
  } finally {
    // the inspector's own console has `require`; closing it frees the port for the next process
    ws.send(
      JSON.stringify({
        id: ++id,
        method: 'Runtime.evaluate',
        params: { expression: "require('inspector').close()", includeCommandLineAPI: true },
      }),
    );
    while (
      await fetch(list).then(
        () => Date.now() < until,
        () => false,
      )
    )
      await new Promise((r) => setTimeout(r, 100));
    ws.terminate();
  }
}
