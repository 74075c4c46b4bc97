/**
 * The wire path of a domain problem's path (camelCase, dotted, `[i]` for list items): every wire
 * name is the snake_case of its domain name, e.g. `readOnlyTools[1]` → `['read_only_tools', 1]`.
 * How the policy API refuses a domain rule on the field the client sent (hedge policies, experiments).
 */
export function wirePathOf(domainPath: string): (string | number)[] {
  const out: (string | number)[] = [];
  for (const part of domainPath.split('.')) {
    const [name, ...indexes] = part.split('[');
    out.push(name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`));
    for (const index of indexes) out.push(Number(index.replace(']', '')));
  }
  return out;
}
