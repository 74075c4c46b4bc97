import 'reflect-metadata';
import { startDispatch } from './app';

startDispatch().catch((err) => {
  console.error(JSON.stringify({ level: 'fatal', service: 'dispatch', msg: 'failed to start', error: String(err?.message ?? err) }));
  process.exit(1);
});
