import 'reflect-metadata';
import { startPolicy } from './app';

startPolicy().catch((err) => {
  console.error(JSON.stringify({ level: 'fatal', service: 'policy', msg: 'failed to start', error: String(err?.message ?? err) }));
  process.exit(1);
});
