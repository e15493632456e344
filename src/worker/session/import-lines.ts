/**
 * The lines of an import's body (docs/operations.md "Export and import"), split in one pass: each byte of the body is
 * scanned once for its line end, and a line's bytes are decoded once, when its end is found, so the work grows with
 * the body, never with the square of a line's length (a body read in small chunks used to rescan a long line's text
 * at every chunk). Used by the session import (session/import-stage.ts); counted by its test and by `bench:export`.
 *
 * A line may be as long as the body (an export written before lines were bounded in bytes); nothing else bounds it.
 * Also here: the nesting depth of a parsed line, measured without recursion, so a value nested deeper than a JSON
 * writer or the storage can take is refused by its line instead of overflowing the stack further on.
 */
import { MAX_IMPORT_BYTES } from "../../api/transfer.js";
import { Problem } from "../problems.js";

/** What the splitter did, for tests and benchmarks: the bytes it read and the bytes it scanned for line ends. */
export interface SplitStats {
  read: number;
  scanned: number;
}

const NEWLINE = 0x0a;

/** An import refused at `line` (1-based), naming it in `detail` and in the problem's `line`. */
export function refusedLine(line: number, detail: string): Problem {
  return new Problem("invalid_import", `line ${line}: ${detail}`, undefined, { line });
}

function joined(parts: readonly Uint8Array[], length: number): Uint8Array {
  if (parts.length === 1) return parts[0] as Uint8Array;
  const out = new Uint8Array(length);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.byteLength;
  }
  return out;
}

/**
 * The lines of `body` (without their "\n"), numbered from 1, decoded as UTF-8 (a line that is not is refused by its
 * number). More than `limit` bytes (default MAX_IMPORT_BYTES) is 413. `stats`, when given, counts the work.
 */
export async function* splitLines(
  body: ReadableStream<Uint8Array>,
  stats: SplitStats = { read: 0, scanned: 0 },
  limit = MAX_IMPORT_BYTES,
): AsyncGenerator<{ readonly line: number; readonly text: string }> {
  const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
  let line = 0;
  /** The current line's bytes so far (chunks, or parts of them, not yet joined). */
  let parts: Uint8Array[] = [];
  let length = 0;
  const decode = (bytes: Uint8Array): string => {
    try {
      return decoder.decode(bytes);
    } catch {
      throw refusedLine(line, "not UTF-8");
    }
  };
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      stats.read += value.byteLength;
      if (stats.read > limit) throw new Problem("payload_too_large", `an import is limited to ${limit} bytes`);
      let from = 0;
      for (;;) {
        const stop = value.indexOf(NEWLINE, from);
        // Only the bytes from `from` on are looked at: each byte of the body once.
        stats.scanned += (stop < 0 ? value.byteLength : stop + 1) - from;
        if (stop < 0) break;
        parts.push(value.subarray(from, stop));
        length += stop - from;
        line += 1;
        const text = decode(joined(parts, length));
        parts = [];
        length = 0;
        yield { line, text };
        from = stop + 1;
      }
      if (from < value.byteLength) {
        parts.push(value.subarray(from));
        length += value.byteLength - from;
      }
    }
  } finally {
    reader.releaseLock();
  }
  if (length > 0) {
    line += 1;
    yield { line, text: decode(joined(parts, length)) };
  }
}

/** The deepest nesting an imported value may have (arrays and objects inside each other). */
export const MAX_IMPORT_DEPTH = 1_000;

/** Whether `value` nests arrays and objects deeper than `max` (an explicit stack: no recursion on a hostile value). */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  const stack: { readonly value: unknown; readonly depth: number }[] = [{ value, depth: 0 }];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    if (typeof next.value !== "object" || next.value === null) continue;
    const depth = next.depth + 1;
    if (depth > max) return true;
    const children = Array.isArray(next.value) ? next.value : Object.values(next.value);
    for (const child of children) if (typeof child === "object" && child !== null) stack.push({ value: child, depth });
  }
  return false;
}
