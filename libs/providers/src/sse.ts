import { createParser, type EventSourceParser } from 'eventsource-parser';

/**
 * Turns an upstream SSE byte stream into its events' `data` payloads, whatever the network
 * chunking. Bytes are decoded with one streaming UTF-8 decoder, so a character split across two
 * reads is joined instead of becoming U+FFFD; the decoder also drops a leading byte-order mark.
 * Lines and fields (CR, LF or CRLF endings, split anywhere; `id:`, `event:`, `retry:`, comments;
 * multi-line `data:`) follow the WHATWG event-stream rules as eventsource-parser implements them.
 */
export class SseDecoder {
  private readonly decoder = new TextDecoder('utf-8');
  private readonly parser: EventSourceParser;
  private ready: string[] = [];
  private endsWithCr = false;

  constructor() {
    this.parser = createParser({ onEvent: (event) => this.ready.push(event.data) });
  }

  /** Feeds one network read; returns the payloads of the events it completed, in order. */
  push(bytes: Uint8Array): string[] {
    this.feed(this.decoder.decode(bytes, { stream: true }));
    return this.take();
  }

  /**
   * Ends the stream. An event without its closing blank line is discarded, as the event-stream
   * rules require: a stream cut mid-event never yields a half event.
   */
  end(): string[] {
    this.feed(this.decoder.decode());
    // The parser holds a trailing CR back in case an LF follows; at the end none will, so that
    // CR ends its line. CR + LF is the same single line ending.
    if (this.endsWithCr) this.parser.feed('\n');
    return this.take();
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
