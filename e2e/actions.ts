import { eventually, stack } from './support';

export async function actionStatus(key: string, actionId: string): Promise<Record<string, any>> {
  const res = await fetch(`${stack.admission}/v1/actions/${actionId}`, { headers: { authorization: `Bearer ${key}` } });
  if (!res.ok) throw new Error(`GET /v1/actions/${actionId} → ${res.status}`);
  return (await res.json()) as Record<string, any>;
}

/** Waits until settlement has resolved the action's reservation. */
export function settledAction(key: string, actionId: string): Promise<Record<string, any>> {
  return eventually(
    async () => {
      const s = await actionStatus(key, actionId);
      return s.reservation_status === 'settled' ? s : undefined;
    },
    { what: `action ${actionId} settled` },
  );
}
