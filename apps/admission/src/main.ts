import 'reflect-metadata';
import { startAdmission } from './app';

startAdmission().catch((err) => {
  console.error(JSON.stringify({ level: 'fatal', service: 'admission', msg: 'failed to start', error: String(err?.message ?? err) }));
  process.exit(1);
});
