import 'reflect-metadata';
import { startReconciliation } from './app';

startReconciliation().catch((err) => {
  console.error(JSON.stringify({ level: 'fatal', service: 'reconciliation', msg: 'failed to start', error: String(err?.message ?? err) }));
  process.exit(1);
});
