/**
 * A Server-Sent Events parser (the WHATWG event-stream format) over a fetch response body, for the typed
 * client's live watches (src/client/watch.ts). Yields one frame per dispatched event; comments
 * (keep-alives) are skipped. Runs anywhere fetch streams do (browsers, Workers, Node).
 */

export interface SseFrame {
  readonly event: string;
  readonly data: string;
  /** The `id:` of this event, if it had one. */
  readonly id: string | undefined;
}

/** Parse an event stream into frames, in order. */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseFrame> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let event = "";
  let data: string[] = [];
  let id: string | undefined;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      for (;;) {
        const newline = buffer.search(/\r\n|\r|\n/);
        if (newline < 0) break;
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
        if (line === "") {
          if (data.length > 0) yield { event: event === "" ? "message" : event, data: data.join("\n"), id };
          event = "";
          data = [];
          id = undefined;
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let text = colon < 0 ? "" : line.slice(colon + 1);
        if (text.startsWith(" ")) text = text.slice(1);
        if (field === "event") event = text;
        else if (field === "data") data.push(text);
        else if (field === "id" && !text.includes("\u0000")) id = text;
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
