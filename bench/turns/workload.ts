/**
 * The §10.3 "many short turns" workload for bench/turns: N faux turns in one conversation, each a
 * generation asking for two echo calls, the two tools, post_tools, and a generation with the final
 * answer. The faux model answers from the newest message only (user -> two calls, tool result -> an
 * answer, the summary prompt -> a summary), so the figures are the harness's. Shared by the workerd
 * bench (memory and SQLite inside a Durable Object) and the Node bench (memory, fine clock).
 */
import {
  createModels,
  fauxAssistantMessage,
  fauxProvider,
  fauxToolCall,
  type FauxResponseFactory,
  type Models,
} from "@earendil-works/pi-ai";
import { BACKGROUND_CONTEXT } from "../../src/core/call.js";
import { Harness, initialValue } from "../../src/core/harness.js";
import { requestMessages } from "../../src/core/context.js";
import { SUMMARY_PROMPT } from "../../src/kinds/collapse.js";
import { generationConfig } from "../../src/kinds/config.js";
import { estimateTokens } from "../../src/kinds/request-cache.js";
import { createTurnKit } from "../../src/kinds/turns.js";
import { bind } from "../../src/core/state.js";
import { usageTotals } from "../../src/kinds/usage.js";
import type { AnyTool } from "../../src/kinds/services.js";
import type { Storage } from "../../src/storage/storage.js";

export const call = BACKGROUND_CONTEXT;

const echo: AnyTool = {
  name: "echo",
  description: "Returns its text.",
  parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  async execute(_id, params, out) {
    out.write(String(params["text"]));
  },
};

export interface Window {
  readonly from: number;
  readonly to: number;
  harnessMs: number;
  providerMs: number;
  /**
   * The provider's own request serialization, inside harnessMs: the faux provider turns the whole
   * request into prompt text for its usage estimate after the factory answers; timed from the factory's
   * return to the first stream event the generation receives.
   */
  serializationMs: number;
  rowsRead: number;
  rowsWritten: number;
  /**
   * Wall time of the whole window, provider included, from a clock sync before its first turn to one
   * after its last (`WorkloadOptions.sync`): workerd's clock advances only on I/O, so per-turn sums
   * miss what runs between two I/O events; a whole window between two syncs does not.
   */
  windowMs: number;
}

export interface RunFigures {
  readonly label: string;
  turns: number;
  totalMs: number;
  providerMs: number;
  windows: Window[];
  scratchCommits: number;
  scratchBytes: number;
  streamedTokens: number;
  collapses: number;
  /** Context token estimate (chars/4) before the request of turn `probeTurn`. */
  probeTokens: number;
  dbBytes: number | undefined;
}

/** Rows counter of a backend (SQLite: exact statement rows; memory: none). */
export interface Rows {
  read(): number;
  written(): number;
}

export interface Workload {
  readonly harness: Harness;
  readonly figures: RunFigures;
  /** Run turns `from`..`to` (1-based, inclusive). */
  run(from: number, to: number): Promise<void>;
}

export interface WorkloadOptions {
  readonly label: string;
  readonly turns: number;
  readonly windows: readonly (readonly [number, number])[];
  /** Threshold collapse: estimated context tokens (0: none). */
  readonly collapseThresholdTokens?: number;
  /** Record the context token estimate before this turn's request. */
  readonly probeTurn?: number;
  readonly rows?: Rows;
  readonly dbBytes?: () => number;
  readonly now: () => number;
  /** Called just before and just after each turn (the profile of one turn starts and stops here). */
  readonly around?: (turn: number, phase: "before" | "after") => void;
  /** Brings the clock up to date before a window starts and after it ends (workerd: a timer; Node: none). */
  readonly sync?: () => Promise<void>;
}

/**
 * The two windows of a run of `turns` turns: turns 1-100 and the last 5% (1901-2000 of 2,000), each
 * at least one turn.
 */
export function turnWindows(turns: number): readonly (readonly [number, number])[] {
  return [
    [1, Math.min(100, turns)],
    [turns - Math.max(1, Math.ceil(turns / 20)) + 1, turns],
  ];
}

/** Open a harness with the turn kit over `storage`; `run` drives turns in slices (one DO callback each). */
export async function openWorkload(storage: Storage, options: WorkloadOptions): Promise<Workload> {
  const now = options.now;
  const figures: RunFigures = {
    label: options.label,
    turns: 0,
    totalMs: 0,
    providerMs: 0,
    windows: options.windows.map(([from, to]) => ({
      from,
      to,
      harnessMs: 0,
      providerMs: 0,
      serializationMs: 0,
      rowsRead: 0,
      rowsWritten: 0,
      windowMs: 0,
    })),
    scratchCommits: 0,
    scratchBytes: 0,
    streamedTokens: 0,
    collapses: 0,
    probeTokens: 0,
    dbBytes: undefined,
  };
  let providerMs = 0;
  let serializationMs = 0;
  /** When the factory last returned; the provider serializes the request after that. */
  let answeredAt: number | undefined;
  const answer: FauxResponseFactory = (context) => {
    const t0 = now();
    const last = context.messages[context.messages.length - 1];
    let message;
    if (last?.role === "user") {
      const text =
        typeof last.content === "string"
          ? last.content
          : last.content.map((c) => (c.type === "text" ? c.text : "")).join("");
      message =
        text === SUMMARY_PROMPT
          ? fauxAssistantMessage("Summary: the user asked for many echoes; every call succeeded.")
          : fauxAssistantMessage(
              [
                fauxToolCall("echo", { text: `${text} a` }, { id: `a-${text}` }),
                fauxToolCall("echo", { text: `${text} b` }, { id: `b-${text}` }),
              ],
              { stopReason: "toolUse" },
            );
    } else {
      message = fauxAssistantMessage("Both echoes came back; done.");
    }
    answeredAt = now();
    providerMs += answeredAt - t0;
    return message;
  };
  const faux = fauxProvider();
  const registry = createModels();
  registry.setProvider(faux.provider);
  const models = timeSerialization(registry, () => {
    if (answeredAt !== undefined) serializationMs += now() - answeredAt;
    answeredAt = undefined;
  });
  const model = faux.getModel();
  // An endless script: every request answers from its newest message.
  const refill = (): void => faux.setResponses(Array.from({ length: 64 }, () => answer));
  refill();
  const kit = createTurnKit({
    models,
    tools: [echo],
    // Frames flush when a generation's stream ends, never on the 50 ms timer: a timed flush depends on
    // the machine's speed and load (workerd's clock advances only on I/O, Node's does not), and the
    // statements, hence the rows, of every run must be the same (bench/turns/trace.ts).
    options: { collapseThresholdTokens: options.collapseThresholdTokens ?? 0, flushMs: 3_600_000 },
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
  harness.onCommit((c) => {
    if (c.batch.kind === "scratch") {
      figures.scratchCommits += 1;
      figures.scratchBytes += JSON.stringify(c.batch.writes).length;
    } else {
      for (const w of c.batch.writes) if (w.type === "task" && w.task.kind === "collapse") figures.collapses += 1;
    }
  });
  const root = await harness.root(call);

  /** When the window that starts at a turn started (by its `from`). */
  const windowStart = new Map<number, number>();

  async function run(from: number, to: number): Promise<void> {
    for (let turn = from; turn <= to; turn++) {
      if (faux.getPendingResponseCount() < 8) refill();
      if (turn === options.probeTurn) {
        figures.probeTokens = estimateTokens(requestMessages(await root.contextEntries(undefined, call)));
      }
      if (figures.windows.some((w) => w.from === turn)) {
        await options.sync?.();
        windowStart.set(turn, now());
      }
      options.around?.(turn, "before");
      const p0 = providerMs;
      const s0 = serializationMs;
      const r0 = options.rows?.read() ?? 0;
      const w0 = options.rows?.written() ?? 0;
      const t0 = now();
      const entry = await root.prompt({ input: `turn ${turn}` }, call);
      const elapsed = now() - t0;
      options.around?.(turn, "after");
      if (entry?.kind !== "assistant") throw new Error(`turn ${turn} got no answer`);
      const provider = providerMs - p0;
      figures.totalMs += elapsed;
      figures.providerMs += provider;
      figures.turns += 1;
      for (const w of figures.windows) {
        if (turn < w.from || turn > w.to) continue;
        w.harnessMs += elapsed - provider;
        w.providerMs += provider;
        w.serializationMs += serializationMs - s0;
        w.rowsRead += (options.rows?.read() ?? 0) - r0;
        w.rowsWritten += (options.rows?.written() ?? 0) - w0;
      }
      for (const w of figures.windows) {
        if (w.to !== turn) continue;
        await options.sync?.();
        w.windowMs = now() - (windowStart.get(w.from) ?? now());
      }
    }
    const totals = (await harness.storage.getValue(bind(usageTotals, {})))?.value;
    figures.streamedTokens = totals?.output ?? 0;
    if (options.dbBytes) figures.dbBytes = options.dbBytes();
  }

  return { harness, figures, run };
}

/** `models` whose streams call `firstEvent` when the caller receives each stream's first event. */
function timeSerialization(models: Models, firstEvent: () => void): Models {
  const streamSimple = (...args: Parameters<Models["streamSimple"]>): ReturnType<Models["streamSimple"]> => {
    const stream = models.streamSimple(...args);
    const iterate = stream[Symbol.asyncIterator].bind(stream);
    stream[Symbol.asyncIterator] = () => {
      const inner = iterate();
      let first = true;
      return {
        next: async () => {
          const result = await inner.next();
          if (first) firstEvent();
          first = false;
          return result;
        },
        return: async (value?: unknown) =>
          inner.return === undefined ? { done: true, value: undefined } : inner.return(value),
        [Symbol.asyncIterator]() {
          return this;
        },
      } as ReturnType<typeof iterate>;
    };
    return stream;
  };
  return new Proxy(models, {
    get(target, key) {
      if (key === "streamSimple") return streamSimple;
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** Print one table for several runs. */
export function printFigures(title: string, runs: readonly RunFigures[]): void {
  const lines: string[] = [`\n${title}`];
  const pad = (s: string, n: number): string => s.padStart(n);
  const range = (i: number): string => {
    const w = runs[0]?.windows[i];
    return w === undefined ? "-" : `${w.from}-${w.to}`;
  };
  lines.push(
    [
      "run".padEnd(34),
      pad("total s", 8),
      pad("provider s", 10),
      pad(`harness ms/turn ${range(0)}`, 21),
      pad(`harness ms/turn ${range(1)}`, 25),
      pad(`rows r/w per turn ${range(0)}`, 23),
      pad(`rows r/w per turn ${range(1)}`, 27),
      pad("scratch commits/token", 21),
      pad("scratch bytes/token", 19),
      pad("collapses", 9),
      pad("db bytes/turn", 13),
    ].join(" | "),
  );
  for (const r of runs) {
    const [early, late] = r.windows;
    const per = (w: Window | undefined, v: (w: Window) => number): string =>
      w === undefined ? "-" : (v(w) / (w.to - w.from + 1)).toFixed(2);
    lines.push(
      [
        r.label.padEnd(34),
        pad((r.totalMs / 1000).toFixed(2), 8),
        pad((r.providerMs / 1000).toFixed(3), 10),
        pad(
          per(early, (w) => w.harnessMs),
          21,
        ),
        pad(
          per(late, (w) => w.harnessMs),
          25,
        ),
        pad(`${per(early, (w) => w.rowsRead)}/${per(early, (w) => w.rowsWritten)}`, 23),
        pad(`${per(late, (w) => w.rowsRead)}/${per(late, (w) => w.rowsWritten)}`, 27),
        pad(r.streamedTokens === 0 ? "-" : (r.scratchCommits / r.streamedTokens).toFixed(3), 21),
        pad(r.streamedTokens === 0 ? "-" : (r.scratchBytes / r.streamedTokens).toFixed(1), 19),
        pad(String(r.collapses), 9),
        pad(r.dbBytes === undefined ? "-" : (r.dbBytes / r.turns).toFixed(0), 13),
      ].join(" | "),
    );
  }
  lines.push(
    `streamed tokens = output tokens of every attempt (pi.usage.totals, faux estimate chars/4); scratch bytes = JSON of scratch writes`,
  );
  console.log(lines.join("\n"));
}

/** One statement's totals over a profiled turn. */
export interface ProfileRow {
  readonly statement: string;
  readonly executions: number;
  readonly rowsRead: number;
  readonly rowsWritten: number;
}

/** Print a per-statement profile of one turn, most rows first (written, then read). */
export function printProfile(title: string, rows: readonly ProfileRow[]): void {
  const sorted = [...rows].sort(
    (a, b) => b.rowsWritten - a.rowsWritten || b.rowsRead - a.rowsRead || b.executions - a.executions,
  );
  const total = sorted.reduce((t, r) => ({ e: t.e + r.executions, r: t.r + r.rowsRead, w: t.w + r.rowsWritten }), {
    e: 0,
    r: 0,
    w: 0,
  });
  const lines = [`\n${title}`, `${"written".padStart(7)} ${"read".padStart(6)} ${"execs".padStart(5)}  statement`];
  for (const r of sorted) {
    const sql = r.statement.length > 150 ? `${r.statement.slice(0, 147)}...` : r.statement;
    lines.push(
      `${String(r.rowsWritten).padStart(7)} ${String(r.rowsRead).padStart(6)} ${String(r.executions).padStart(5)}  ${sql}`,
    );
  }
  lines.push(
    `${String(total.w).padStart(7)} ${String(total.r).padStart(6)} ${String(total.e).padStart(5)}  total (${sorted.length} distinct statements)`,
  );
  console.log(lines.join("\n"));
}
