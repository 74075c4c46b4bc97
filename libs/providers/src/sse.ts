/** Splits a byte stream into SSE `data:` payloads (events separated by a blank line). */
export class SseParser {
  private buffer = '';

  push(text: string): string[] {
    // Normalise line endings over the whole buffer: a CRLF may be split across two pieces, so a
    // trailing lone CR waits for the next piece.
    this.buffer = (this.buffer + text).replace(/\r\n/g, '\n');
    const out: string[] = [];
    let sep: number;
    while ((sep = this.buffer.indexOf('\n\n')) >= 0) {
      const event = this.buffer.slice(0, sep);
      this.buffer = this.buffer.slice(sep + 2);
      const data = event
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, ''))
        .join('\n');
      if (data.length > 0) out.push(data);
    }
    return out;
  }
}
