import 'reflect-metadata';
import { startSettlement } from './app';

startSettlement().catch((err) => {
  console.error(JSON.stringify({ level: 'fatal', service: 'settlement', msg: 'failed to start', error: String(err?.message ?? err) }));
  process.exit(1);
});
