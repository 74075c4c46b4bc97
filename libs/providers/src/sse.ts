import { createParser, type EventSourceParser } from 'eventsource-parser';
import { AnswerTooLarge } from './bounded';

/**
 * Turns an upstream SSE byte stream into its events' `data` payloads, whatever the network
 * chunking. Bytes are decoded with one streaming UTF-8 decoder, so a character split across two
 * reads is joined instead of becoming U+FFFD; the decoder also drops a leading byte-order mark.
 * Lines and fields (CR, LF or CRLF endings, split anywhere; `id:`, `event:`, `retry:`, comments;
 * multi-line `data:`) follow the WHATWG event-stream rules as eventsource-parser implements them.
 * `maxEventChars` bounds what one event may hold before it ends: the parser keeps an unfinished
 * event in memory, so a stream that never ends its event would otherwise grow it without end;
 * once a read takes it past the bound, the events that read completed are still returned and the
 * next `push` or `end` throws `AnswerTooLarge` (the stream's total is not bounded: its events are
 * relayed as they come).
 */
export class SseDecoder {
  private readonly decoder = new TextDecoder('utf-8');
  private readonly parser: EventSourceParser;
  private ready: string[] = [];
  private endsWithCr = false;
  /** characters pushed since an event last ended (at most one read more than the unfinished event) */
  private unfinished = 0;

  constructor(private readonly maxEventChars = Number.POSITIVE_INFINITY) {
    this.parser = createParser({ onEvent: (event) => this.ready.push(event.data) });
  }

  /** Feeds one network read; returns the payloads of the events it completed, in order. */
  push(bytes: Uint8Array): string[] {
    this.refuseOverflow();
    const text = this.decoder.decode(bytes, { stream: true });
    this.feed(text);
    const events = this.take();
    this.unfinished = events.length > 0 ? text.length - lastEventEnd(text) : this.unfinished + text.length;
    // the events this read completed are still handed out; the next push (or end) throws
    return events;
  }

  /**
   * Ends the stream. An event without its closing blank line is discarded, as the event-stream
   * rules require: a stream cut mid-event never yields a half event.
   */
  end(): string[] {
    this.refuseOverflow();
    this.feed(this.decoder.decode());
    // The parser holds a trailing CR back in case an LF follows; at the end none will, so that
    // CR ends its line. CR + LF is the same single line ending.
    if (this.endsWithCr) this.parser.feed('\n');
    return this.take();
  }

  private refuseOverflow(): void {
    if (this.unfinished > this.maxEventChars) throw new AnswerTooLarge(this.maxEventChars);
  }

  private feed(text: string): void {
    if (text.length === 0) return;
    this.endsWithCr = text.endsWith('\r');
    this.parser.feed(text);
  }

  private take(): string[] {
    const out = this.ready;
    this.ready = [];
    return out;
  }
}

/** Where the last blank line (an event's end) in `text` ends; 0 when it has none (its end came split across reads). */
function lastEventEnd(text: string): number {
  let end = 0;
  for (const m of text.matchAll(/(?:\r\n|\n|\r(?!\n))(?:\r\n|\n|\r(?!\n))/g)) end = m.index + m[0].length;
  return end;
}
