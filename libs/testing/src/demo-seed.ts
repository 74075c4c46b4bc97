import { Database } from '@gateway/db';
import { Seeder } from './seed';

/** Demo data for `npm start`: prints a JSON line with the keys and tokens it issued. */
export async function seedDemo(databaseUrl: string, providerSimUrl: string, demoKey?: string): Promise<Record<string, string>> {
  const db = new Database(databaseUrl);
  try {
    const seed = new Seeder(db);
    await seed.route({
      routeId: 'approved-standard',
      alias: 'approved-standard',
      providerKind: 'openai-chat',
      upstreamBaseUrl: providerSimUrl,
      upstreamModel: 'sim-gpt',
    });
    await seed.route({
      routeId: 'gemini-flash',
      alias: 'gemini-flash',
      providerKind: 'gemini-generate',
      upstreamBaseUrl: providerSimUrl,
      upstreamModel: 'gemini-sim',
    });
    const support = await seed.workload({ id: 'support-draft', allowedAliases: ['approved-standard', 'gemini-flash'] });
    const supportKey = demoKey ? await seed.key('support-draft', demoKey).catch(() => demoKey) : support.key;
    const evalRerank = await seed.workload({
      id: 'eval-rerank',
      allowedAliases: ['approved-standard', 'gemini-flash'],
      perCandidateOutputCeiling: 256,
    });
    const existing = await db.prisma.candidateException.findFirst({
      where: { workloadId: 'eval-rerank', status: 'active', expiresAt: { gt: new Date() } },
    });
    if (!existing) {
      await seed.approvedException({
        workloadId: 'eval-rerank',
        maxCandidates: 2,
        perCandidateOutputCeiling: 256,
        budgetMicrousd: 10_000_000n,
        expiresAt: new Date(Date.now() + 7 * 24 * 3600 * 1000),
        requestedBy: 'demo-operator',
        approvedBy: 'demo-approver',
      });
    }
    const operatorToken = await seed.operator('demo-operator', ['operator', 'finance']);
    const approverToken = await seed.operator('demo-approver', ['approver']);
    return { supportDraftKey: supportKey, evalRerankKey: evalRerank.key, operatorToken, approverToken };
  } finally {
    await db.close();
  }
}
