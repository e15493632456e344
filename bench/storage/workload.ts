/**
 * The storage benchmark's workload and measurement (§10.3): a conversation with `depth`
 * entries of history (a summary head every 500), forked near the end so reads cross one fork level;
 * then typical six-write turn commits, newestHead and a 50-entry transcript page, each repeated many
 * times. Shared by every backend in storage.bench.ts; SQLite rows come from `SqliteStorage.stats`.
 */
import type { Entry, Id, MainWrite } from "../../src/storage/records.js";
import type { Storage } from "../../src/storage/storage.js";

const BATCH = 500;
const HEAD_EVERY = 500;
const FORK_ENTRIES = 20;
const TURNS = 200;
const READS = 1_000;

export interface Rows {
  readonly rowsRead: number;
  readonly rowsWritten: number;
}

export interface Figures {
  readonly backend: string;
  readonly depth: number;
  readonly buildMs: number;
  readonly turnMs: number;
  readonly headMs: number;
  readonly pageMs: number;
  /** SQLite rows per call (undefined for backends without row counts). */
  readonly turnRows?: Rows;
  readonly headRows?: Rows;
  readonly pageRows?: Rows;
  /** Bytes on disk divided by the entries stored, measured right after the build. */
  readonly bytesPerEntry?: number;
}

function entry(conversationId: Id, id: Id, n: number): Entry {
  if (n % HEAD_EVERY === 0)
    return {
      id,
      conversationId,
      kind: "summary",
      model: [{ role: "user", content: `summary through ${id - 40}`, timestamp: 0 }],
      head: id - 40,
    };
  return n % 2 === 1
    ? {
        id,
        conversationId,
        kind: "user",
        model: [{ role: "user", content: `question ${n}: ${"lorem ipsum ".repeat(8)}`, timestamp: 0 }],
      }
    : {
        id,
        conversationId,
        kind: "assistant",
        data: { n },
        model: [{ role: "user", content: `answer ${n}: ${"dolor sit amet ".repeat(12)}`, timestamp: 0 }],
      };
}

async function create(storage: Storage, parent?: { conversationId: Id; at: Id }): Promise<Id> {
  const id = storage.lastSeq + 1;
  await storage.commit({
    kind: "main",
    writes: [{ type: "createConversation", conversation: { id, ...(parent ? { parent } : {}) } }],
  });
  return id;
}

async function append(storage: Storage, conversationId: Id, count: number, offset: number): Promise<void> {
  for (let done = 0; done < count; done += BATCH) {
    const writes: MainWrite[] = [];
    for (let k = 0; k < Math.min(BATCH, count - done); k++)
      writes.push({ type: "entry", entry: entry(conversationId, storage.lastSeq + 1 + k, offset + done + k + 1) });
    await storage.commit({ kind: "main", writes });
  }
}

/** `depth` logical entries: depth - 20 in the root, then a fork at its end with 20 of its own. */
export async function build(storage: Storage, depth: number): Promise<Id> {
  const root = await create(storage);
  await append(storage, root, depth - FORK_ENTRIES, 0);
  const fork = await create(storage, { conversationId: root, at: storage.lastSeq });
  await append(storage, fork, FORK_ENTRIES, depth - FORK_ENTRIES);
  return fork;
}

/** Six writes: user entry, generation task, patch of the previous one, a rewindable value, a list append, an answer. */
async function turn(storage: Storage, conversationId: Id, previous: Id | undefined): Promise<Id> {
  const first = storage.lastSeq + 1;
  const plan = { scope: { conversation: conversationId }, namespace: "plugin.plan", rewind: true } as const;
  const moves = { scope: { conversation: conversationId }, namespace: "game.moves", rewind: true } as const;
  await storage.commit({
    kind: "main",
    writes: [
      {
        type: "entry",
        entry: {
          id: first,
          conversationId,
          kind: "user",
          model: [{ role: "user", content: "next step please", timestamp: 0 }],
        },
      },
      {
        type: "task",
        task: {
          id: first + 1,
          conversationId,
          kind: "generation",
          role: "start",
          state: { status: "pending", inputs: [first] },
          after: [],
        },
      },
      previous === undefined
        ? { type: "value.set", addr: { ...plan, namespace: "turn.first" }, value: true }
        : { type: "settle", id: previous, role: "terminal", state: { status: "done", answer: first - 1 } },
      { type: "value.set", addr: plan, value: { step: first, notes: "a small plan" } },
      { type: "list.append", addr: moves, value: { move: first } },
      {
        type: "entry",
        entry: {
          id: first + 5,
          conversationId,
          kind: "assistant",
          model: [{ role: "user", content: "done with the step", timestamp: 0 }],
        },
      },
    ],
  });
  return first + 1;
}

async function timed(
  runs: number,
  fn: () => Promise<unknown>,
  rows?: () => Rows,
): Promise<{ ms: number; rows?: Rows }> {
  const before = rows?.();
  const start = performance.now();
  for (let i = 0; i < runs; i++) await fn();
  const ms = (performance.now() - start) / runs;
  if (rows === undefined || before === undefined) return { ms };
  const after = rows();
  return {
    ms,
    rows: {
      rowsRead: (after.rowsRead - before.rowsRead) / runs,
      rowsWritten: (after.rowsWritten - before.rowsWritten) / runs,
    },
  };
}

export interface Probe {
  /** Cumulative SQL rows, for backends that count them. */
  readonly rows?: () => Rows;
  /** Bytes the backend holds on disk now. */
  readonly bytes?: () => Promise<number> | number;
}

export async function measure(backend: string, storage: Storage, depth: number, probe: Probe = {}): Promise<Figures> {
  const start = performance.now();
  const fork = await build(storage, depth);
  const buildMs = performance.now() - start;
  const bytes = probe.bytes === undefined ? undefined : await probe.bytes();
  let previous: Id | undefined;
  const turns = await timed(
    TURNS,
    async () => {
      previous = await turn(storage, fork, previous);
    },
    probe.rows,
  );
  const at = storage.lastSeq;
  const head = await timed(
    READS,
    async () => {
      if ((await storage.newestHead(fork, at)) === undefined) throw new Error("no head");
    },
    probe.rows,
  );
  const page = await timed(
    READS,
    async () => {
      const p = await storage.scanEntries({ conversationId: fork, before: at + 1, limit: 50 });
      if (p.items.length !== 50) throw new Error("short page");
    },
    probe.rows,
  );
  return {
    backend,
    depth,
    buildMs,
    turnMs: turns.ms,
    headMs: head.ms,
    pageMs: page.ms,
    ...(turns.rows ? { turnRows: turns.rows } : {}),
    ...(head.rows ? { headRows: head.rows } : {}),
    ...(page.rows ? { pageRows: page.rows } : {}),
    ...(bytes === undefined ? {} : { bytesPerEntry: bytes / depth }),
  };
}

const fmt = (n: number | undefined, digits = 3): string => (n === undefined ? "-" : n.toFixed(digits));
const rows = (r: Rows | undefined): string =>
  r === undefined ? "-" : `${fmt(r.rowsRead, 1)}/${fmt(r.rowsWritten, 1)}`;

/** A plain-text table, one line per (backend, depth). */
export function table(all: readonly Figures[]): string {
  const header = [
    "backend",
    "depth",
    "build s",
    "turn ms",
    "turn rows r/w",
    "head ms",
    "head rows r/w",
    "page ms",
    "page rows r/w",
    "disk B/entry",
  ];
  const lines = all.map((f) => [
    f.backend,
    f.depth.toLocaleString("en-US"),
    fmt(f.buildMs / 1000, 2),
    fmt(f.turnMs),
    rows(f.turnRows),
    fmt(f.headMs),
    rows(f.headRows),
    fmt(f.pageMs),
    rows(f.pageRows),
    fmt(f.bytesPerEntry, 0),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => (l[i] as string).length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padStart(widths[i] as number)).join("  ");
  return [line(header), ...lines.map(line)].join("\n");
}
