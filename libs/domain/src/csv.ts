/**
 * One RFC 4180 record: a field with a comma, quote or line break is quoted, quotes doubled; null is
 * an empty field. A text field a spreadsheet would run as a formula (= + - @, tab, CR first) gets a
 * leading apostrophe; numbers and money strings are digits and never do.
 */
export function csvRow(fields: Array<string | number | null>): string {
  return (
    fields
      .map((f) => {
        if (f === null) return '';
        if (typeof f === 'number') return String(f);
        const safe = /^[=+\-@\t\r]/.test(f) ? `'${f}` : f;
        return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
      })
      .join(',') + '\r\n'
  );
}
