/**
 * Polls `probe` until it returns a value (not undefined) or the timeout passes. libs/db tests
 * cannot use @gateway/testing's `eventually` (testing depends on db), so this is their copy.
 */
export async function until<T>(probe: () => T | undefined | Promise<T | undefined>, timeoutMs = 15000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}
