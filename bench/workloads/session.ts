/**
 * Shared rig of the §10.3 workload benches (bench/workloads): a turn-kit harness over `SqliteStorage`
 * inside a fresh Durable Object, a faux model answering from the newest message, and a meter of the
 * billed rows (exact, `SqlStorage` cursors) and database bytes (`sql.databaseSize`: every page,
 * scratch included; the WAL is the runtime's and not visible). workerd's clock advances only on I/O,
 * so these benches print rows and bytes, not times; JS heap is not measurable inside workerd (the Node
 * bench, bench/time, prints it for the many-turns workload).
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import {
  createModels,
  fauxAssistantMessage,
  fauxProvider,
  fauxToolCall,
  type FauxResponseFactory,
} from "@earendil-works/pi-ai";
import { BACKGROUND_CONTEXT } from "../../src/core/call.js";
import { Harness, initialValue } from "../../src/core/harness.js";
import { SUMMARY_PROMPT } from "../../src/kinds/collapse.js";
import { generationConfig } from "../../src/kinds/config.js";
import type { AnyTool, TurnOptions } from "../../src/kinds/services.js";
import { createTurnKit, type TurnKit } from "../../src/kinds/turns.js";
import { SqliteStorage } from "../../src/storage/sqlite.js";

export const call = BACKGROUND_CONTEXT;

export const echo: AnyTool = {
  name: "echo",
  description: "Returns its text.",
  parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  async execute(_id, params, out) {
    out.write(String(params["text"]));
  },
};

export function textOf(content: string | readonly { type: string; text?: string }[]): string {
  return typeof content === "string" ? content : content.map((c) => (c.type === "text" ? (c.text ?? "") : "")).join("");
}

/**
 * A user prompt gets `calls` echo calls in one message; a tool result gets the answer; the summary
 * prompt a summary. System messages (a fresh section baseline after a collapse lands after the prompt)
 * are skipped when looking for the newest message.
 */
export function parallelAnswer(calls: number): FauxResponseFactory {
  return (context) => {
    const last = context.messages.findLast((m) => m.role !== "system");
    if (last?.role !== "user") return fauxAssistantMessage("Done.");
    const text = textOf(last.content);
    if (text === SUMMARY_PROMPT) return fauxAssistantMessage("Summary: echoes.");
    return fauxAssistantMessage(
      Array.from({ length: calls }, (_, i) => fauxToolCall("echo", { text: `${text} ${i}` }, { id: `c${i}-${text}` })),
      { stopReason: "toolUse" },
    );
  };
}

export interface Session {
  readonly storage: SqliteStorage;
  readonly harness: Harness;
  readonly kit: TurnKit;
  readonly faux: ReturnType<typeof fauxProvider>;
  /** Keep at least 64 responses queued from `answer`. */
  refill(): void;
}

export async function openSession(
  storage: SqliteStorage,
  answer: FauxResponseFactory,
  options: { turn?: Partial<TurnOptions>; tools?: AnyTool[]; tokenSize?: { min: number; max: number } } = {},
): Promise<Session> {
  const faux = fauxProvider(options.tokenSize === undefined ? {} : { tokenSize: options.tokenSize });
  const models = createModels();
  models.setProvider(faux.provider);
  const model = faux.getModel();
  const kit = createTurnKit({
    models,
    tools: options.tools ?? [echo],
    options: { flushMs: 3_600_000, ...options.turn },
  });
  const harness = await Harness.open(
    storage,
    {
      taskKinds: kit.kinds,
      rootValues: [
        initialValue(generationConfig.model, `${model.provider}/${model.id}`),
        initialValue(generationConfig.selectedTools, ["echo"]),
      ],
    },
    call,
  );
  kit.install(harness);
  const refill = (): void => {
    if (faux.getPendingResponseCount() < 64) faux.setResponses(Array.from({ length: 128 }, () => answer));
  };
  refill();
  return { storage, harness, kit, faux, refill };
}

export interface Reading {
  readonly rowsRead: number;
  readonly rowsWritten: number;
  readonly bytes: number;
}

/** Rows and bytes now, to diff around a step. */
export function reading(storage: SqliteStorage, state: DurableObjectState): Reading {
  return {
    rowsRead: storage.stats.rowsRead,
    rowsWritten: storage.stats.rowsWritten,
    bytes: state.storage.sql.databaseSize,
  };
}

export function since(before: Reading, after: Reading): Reading {
  return {
    rowsRead: after.rowsRead - before.rowsRead,
    rowsWritten: after.rowsWritten - before.rowsWritten,
    bytes: after.bytes - before.bytes,
  };
}

/** Run `fn` in a fresh Durable Object of the session class. */
export function inObject<T>(name: string, fn: (state: DurableObjectState) => Promise<T>): Promise<T> {
  const stub = env.SESSIONS.get(env.SESSIONS.idFromName(`bench-${name}-${Date.now()}-${Math.random()}`));
  return runInDurableObject(stub, async (_instance, state) => fn(state));
}

/** One printed table: a title, a header and rows of cells. */
export function table(title: string, header: readonly string[], rows: readonly (readonly (string | number)[])[]): void {
  const cells = [
    header,
    ...rows.map((r) => r.map((c) => (typeof c === "number" ? (Number.isInteger(c) ? String(c) : c.toFixed(2)) : c))),
  ];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => String(r[i] ?? "").length)));
  const line = (r: readonly (string | number)[]): string =>
    r.map((c, i) => (i === 0 ? String(c).padEnd(widths[i] ?? 0) : String(c).padStart(widths[i] ?? 0))).join(" | ");
  console.log([`\n${title}`, ...cells.map(line)].join("\n"));
}
