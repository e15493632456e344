/**
 * A complete, comparable dump of a storage, read through the `Storage` interface only (§10.1): current
 * objects and live-task metadata, every entry, fork-aware transcript pages (forward, backward, windows,
 * from/through, kind/key filters), newest heads and derived contexts at several boundaries, tasks and
 * every scan filter, values current and at several entry positions, scanValues pages, lists current and
 * at positions, scratch of every task (so retired scratch must read empty), entry kinds, and optionally
 * the next allocated sequence (which commits, so it comes last).
 *
 * Batched gets ask for every id 1..lastSeq in one call (hundreds of ids), so a backend's own chunking
 * (SQLite's bound-parameter limit) is exercised too.
 *
 * A dump is a map from a readable label ("scanEntries conv=5 forward limit=2") to the canonical JSON of
 * what that read returned, or of the error code it threw, so two backends are compared read by read and
 * a failure names the read that differs. Only what must be is normalised: Maps become sorted arrays,
 * object keys are sorted, undefined members dropped, entryKinds sorted.
 */
import { deriveContext } from "../../src/core/context.js";
import type { Cursor, Entry, EntryQuery, Id, Page, TaskQuery } from "../../src/storage/records.js";
import { StorageError, type Storage } from "../../src/storage/storage.js";
import {
  ENTRY_KEYS,
  ENTRY_KINDS,
  REWIND_LISTS,
  REWIND_VALUES,
  SCRATCH_LISTS,
  SCRATCH_VALUES,
  SESSION_LISTS,
  SESSION_VALUES,
  STICKY_LISTS,
  STICKY_VALUES,
  TASK_KINDS,
  addressLabel,
  conversationList,
  conversationValue,
  scratchList,
  scratchValue,
  sessionList,
  sessionValue,
  type Family,
} from "./vocabulary.js";

export type Dump = Map<string, string>;

const MAX = Number.MAX_SAFE_INTEGER;

/** Canonical JSON: sorted object keys, undefined members dropped, Maps as entry arrays sorted by key. */
export function canonical(value: unknown): string {
  return JSON.stringify(normalize(value));
}

function normalize(value: unknown): unknown {
  if (value instanceof Map) {
    return [...value.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, v]) => [k, normalize(v)]);
  }
  if (Array.isArray(value)) return value.map(normalize);
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) {
      const member = (value as Record<string, unknown>)[key];
      if (member !== undefined) out[key] = normalize(member);
    }
    return out;
  }
  return value === undefined ? null : value;
}

export interface DumpOptions {
  /** Also commit an empty batch and one marker write, recording the ranges (mutates the storage). */
  readonly probeNext?: boolean;
}

/** Entry positions to read state and heads at: 0 ("start"), up to 6 spread transcript ids, the last id + 1. */
export function positionsOf(ids: readonly Id[]): Id[] {
  if (ids.length === 0) return [0];
  const picked = new Set<Id>([0]);
  const steps = Math.min(6, ids.length);
  for (let i = 0; i < steps; i++) picked.add(ids[Math.round((i * (ids.length - 1)) / Math.max(1, steps - 1))] as Id);
  return [...picked].sort((a, b) => a - b);
}

class Recorder {
  readonly dump: Dump = new Map();

  constructor(readonly storage: Storage) {}

  set(label: string, value: unknown): void {
    if (this.dump.has(label)) throw new Error(`duplicate dump label ${label}`);
    this.dump.set(label, canonical(value));
  }

  /** Record what a read returns or the error it throws; returns the value (undefined on error). */
  async read<T>(label: string, fn: () => Promise<T>, shape: (value: T) => unknown = (v) => v): Promise<T | undefined> {
    try {
      const value = await fn();
      this.set(label, shape(value));
      return value;
    } catch (error) {
      this.set(label, { error: describeError(error) });
      return undefined;
    }
  }

  /** Follow `next` from `start` to the end, recording each page's ids, next and readAt. */
  async chain<Q extends Cursor, T>(
    label: string,
    start: Q,
    fetch: (cursor: Q) => Promise<Page<T>>,
    idOf: (item: T) => Id | string,
  ): Promise<void> {
    const pages: unknown[] = [];
    let cursor = start;
    try {
      for (let n = 0; n < 500; n++) {
        const page = await fetch(cursor);
        pages.push({ items: page.items.map(idOf), next: page.next, readAt: page.readAt });
        if (page.next === undefined) break;
        cursor =
          start.before !== undefined && start.after === undefined
            ? { ...start, before: page.next }
            : { ...start, after: page.next };
      }
    } catch (error) {
      pages.push({ error: describeError(error) });
    }
    this.set(label, pages);
  }
}

export function describeError(error: unknown): string {
  if (error instanceof StorageError) return error.code;
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}

function* addressesOf(families: readonly Family[]): Generator<{ namespace: string; key: string | undefined }> {
  for (const family of families) for (const key of family.keys) yield { namespace: family.namespace, key };
}

const entryId = (e: { id: Id }): Id => e.id;

/** Read the complete comparable dump of `storage`. */
export async function readDump(storage: Storage, options: DumpOptions = {}): Promise<Dump> {
  const r = new Recorder(storage);
  const s = storage;
  const lastSeq = s.lastSeq;
  r.set("lastSeq", lastSeq);
  const every = Array.from({ length: lastSeq }, (_, i) => i + 1);

  // Conversations.
  const conversations = (await r.read("getConversations (every id)", () => s.getConversations(every))) ?? new Map();
  const conversationIds = [...conversations.keys()].sort((a, b) => a - b);
  await r.read("getConversations (missing ids)", () => s.getConversations([0, lastSeq + 1, lastSeq + 1000]));
  await r.chain("scanConversations forward limit=3", { limit: 3 }, (c) => s.scanConversations(c), entryId);
  await r.chain(
    "scanConversations backward limit=2",
    { before: MAX, limit: 2 },
    (c) => s.scanConversations(c),
    entryId,
  );
  await r.read("scanConversations all", () => s.scanConversations({ limit: 1000 }));
  if (conversationIds.length > 2) {
    const window = { after: conversationIds[0], before: conversationIds.at(-1), limit: 1 };
    await r.chain("scanConversations window limit=1", window, (c) => s.scanConversations(c), entryId);
  }
  const parents = new Set<Id>(conversationIds);
  const owners = new Set<Id>();
  for (const c of conversations.values()) {
    if (c.parent !== undefined) parents.add(c.parent.conversationId);
    if (c.owner !== undefined) owners.add(c.owner);
  }
  for (const p of [...parents].sort((a, b) => a - b)) {
    await r.read(
      `scanConversations parent=${p}`,
      () => s.scanConversations({ parent: p, limit: 1000 }),
      (pg) => pg.items.map(entryId),
    );
  }
  for (const o of [...owners].sort((a, b) => a - b)) {
    await r.chain(
      `scanConversations ownedFrom=${o} limit=1`,
      { ownedFrom: o, limit: 1 } as Cursor,
      (c) => s.scanConversations({ ...c, ownedFrom: o }),
      entryId,
    );
  }

  // Entries by id: those of live conversations, and separately those of deleted ones.
  const entries =
    (await r.read(
      "getEntries (every id, raw)",
      () => s.getEntries(every),
      () => "read",
    )) ?? new Map();
  const own = new Map<Id, Entry>();
  const ofDeleted = new Map<Id, Entry>();
  for (const [id, e] of entries) (conversations.has(e.conversationId) ? own : ofDeleted).set(id, e);
  r.set("getEntries (every id)", own);
  r.set("getEntries (entries of deleted conversations)", ofDeleted);
  await r.read("getEntries (missing ids)", () => s.getEntries([0, lastSeq + 1]));
  await r.read("getEntries (no ids)", () => s.getEntries([]));
  const someEntries = [...own.keys()].slice(0, 3);
  await r.read("getEntries (repeated ids, descending)", () => s.getEntries([...someEntries, ...someEntries].reverse()));

  // Per conversation: transcript, pages, filters, heads, contexts, rewindable and sticky state.
  for (const c of conversationIds) {
    const label = `conv=${c}`;
    const transcript = await r.read(`scanEntries ${label} all`, () =>
      s.scanEntries({ conversationId: c, limit: 1000 }),
    );
    const ids = transcript?.items.map(entryId) ?? [];
    r.set(`transcript ids ${label}`, ids);
    const scan = (q: EntryQuery) => s.scanEntries(q);
    await r.chain(
      `scanEntries ${label} forward limit=2`,
      { limit: 2 },
      (q) => scan({ ...q, conversationId: c }),
      entryId,
    );
    await r.chain(
      `scanEntries ${label} backward limit=3`,
      { before: MAX, limit: 3 },
      (q) => scan({ ...q, conversationId: c }),
      entryId,
    );
    if (ids.length >= 4) {
      const window = { after: ids[0], before: ids.at(-1), limit: 2 };
      await r.chain(`scanEntries ${label} window limit=2`, window, (q) => scan({ ...q, conversationId: c }), entryId);
      const mid = ids[Math.floor(ids.length / 2)] as Id;
      await r.chain(
        `scanEntries ${label} before=${mid} limit=2`,
        { before: mid, limit: 2 },
        (q) => scan({ ...q, conversationId: c }),
        entryId,
      );
      await r.chain(
        `scanEntries ${label} after=${mid} limit=2`,
        { after: mid, limit: 2 },
        (q) => scan({ ...q, conversationId: c }),
        entryId,
      );
    }
    const positions = positionsOf(ids);
    for (let i = 0; i + 1 < positions.length; i += 2) {
      const from = positions[i] as Id;
      const through = positions[i + 1] as Id;
      await r.read(
        `scanEntries ${label} from=${from} through=${through}`,
        () => scan({ conversationId: c, from, through, limit: 1000 }),
        (p) => p.items.map(entryId),
      );
      await r.read(
        `scanEntries ${label} from=${from + 1} through=${through - 1}`,
        () => scan({ conversationId: c, from: from + 1, through: through - 1, limit: 1000 }),
        (p) => p.items.map(entryId),
      );
      await r.chain(
        `scanEntries ${label} from=${through} limit=2`,
        { limit: 2 },
        (q) => scan({ ...q, conversationId: c, from: through }),
        entryId,
      );
      await r.chain(
        `scanEntries ${label} through=${through} backward limit=2`,
        { before: MAX, limit: 2 },
        (q) => scan({ ...q, conversationId: c, through }),
        entryId,
      );
    }
    for (const kind of ENTRY_KINDS) {
      await r.read(
        `scanEntries ${label} kind=${kind}`,
        () => scan({ conversationId: c, kind, limit: 1000 }),
        (p) => p.items.map(entryId),
      );
    }
    for (const key of ENTRY_KEYS) {
      await r.read(
        `scanEntries ${label} key=${key}`,
        () => scan({ conversationId: c, key, limit: 1000 }),
        (p) => p.items.map(entryId),
      );
      await r.read(
        `scanEntries ${label} kind=user key=${key}`,
        () => scan({ conversationId: c, kind: "user", key, limit: 1000 }),
        (p) => p.items.map(entryId),
      );
    }
    await r.chain(
      `scanEntries ${label} kind=summary backward limit=1`,
      { before: MAX, limit: 1 },
      (q) => scan({ ...q, conversationId: c, kind: "summary" }),
      entryId,
    );
    if (positions.length > 2) {
      const through = positions[positions.length - 2] as Id;
      await r.chain(
        `scanEntries ${label} kind=assistant through=${through} limit=1`,
        { limit: 1 },
        (q) => scan({ ...q, conversationId: c, kind: "assistant", through }),
        entryId,
      );
    }
    for (const at of [...positions, MAX]) {
      const head = await r.read(`newestHead ${label} at=${at}`, () => s.newestHead(c, at));
      if (head?.head !== undefined) {
        // The derived context's transcript range: from the head's boundary through the target (§2.2).
        const from = head.head;
        await r.read(
          `context ${label} at=${at}`,
          () => scan({ conversationId: c, from, through: at, limit: 1000 }),
          (p) => p.items.map(entryId),
        );
      }
      // The derived context itself (§10.1): ids and effective messages at this boundary.
      if (at !== MAX) {
        await r.read(
          `deriveContext ${label} at=${at}`,
          () => deriveContext(s, c, at),
          (d) => ({ ids: d.ids, messages: d.items.map((item) => item.messages) }),
        );
      }
    }
    for (const { namespace, key } of addressesOf(REWIND_VALUES)) {
      const addr = conversationValue(c, namespace, key, true);
      await r.read(`getValue ${addressLabel(addr)}`, () => s.getValue(addr));
      for (const at of positions) await r.read(`getValue ${addressLabel(addr)} at=${at}`, () => s.getValue(addr, at));
    }
    for (const { namespace, key } of addressesOf(STICKY_VALUES)) {
      const addr = conversationValue(c, namespace, key, false);
      await r.read(`getValue ${addressLabel(addr)}`, () => s.getValue(addr));
      await r.read(`getValue ${addressLabel(addr)} at=${ids.at(-1) ?? 0}`, () => s.getValue(addr, ids.at(-1) ?? 0));
    }
    for (const family of [...REWIND_VALUES, ...STICKY_VALUES]) {
      const scope = { conversation: c };
      await r.read(`scanValues ${label} ${family.namespace}`, () =>
        s.scanValues({ scope, namespace: family.namespace, limit: 1000 }),
      );
      await valueChain(r, `scanValues ${label} ${family.namespace} limit=1`, (after) =>
        s.scanValues({ scope, namespace: family.namespace, limit: 1, ...(after === undefined ? {} : { after }) }),
      );
    }
    for (const { namespace, key } of addressesOf(REWIND_LISTS)) {
      const addr = conversationList(c, namespace, key, true);
      await r.read(`readList ${addressLabel(addr)} all`, () => s.readList(addr, { limit: 1000 }));
      await r.chain(
        `readList ${addressLabel(addr)} forward limit=2`,
        { limit: 2 },
        (q) => s.readList(addr, q),
        entryId,
      );
      await r.chain(
        `readList ${addressLabel(addr)} backward limit=2`,
        { before: MAX, limit: 2 },
        (q) => s.readList(addr, q),
        entryId,
      );
      for (const at of positions) {
        await r.read(`readList ${addressLabel(addr)} at=${at}`, () => s.readList(addr, { at, limit: 1000 }));
      }
      const at = positions.at(-1) ?? 0;
      await r.chain(
        `readList ${addressLabel(addr)} at=${at} backward limit=1`,
        { before: MAX, limit: 1 },
        (q) => s.readList(addr, { ...q, at }),
        entryId,
      );
    }
    for (const { namespace, key } of addressesOf(STICKY_LISTS)) {
      const addr = conversationList(c, namespace, key, false);
      await r.read(`readList ${addressLabel(addr)} all`, () => s.readList(addr, { limit: 1000 }));
      await r.chain(
        `readList ${addressLabel(addr)} forward limit=2`,
        { limit: 2 },
        (q) => s.readList(addr, q),
        entryId,
      );
      await r.read(`readList ${addressLabel(addr)} at=0`, () => s.readList(addr, { at: 0, limit: 1000 }));
    }
  }

  // Session state.
  for (const { namespace, key } of addressesOf(SESSION_VALUES)) {
    const addr = sessionValue(namespace, key);
    await r.read(`getValue ${addressLabel(addr)}`, () => s.getValue(addr));
  }
  for (const family of SESSION_VALUES) {
    const scope = { session: true } as const;
    await r.read(`scanValues session ${family.namespace}`, () =>
      s.scanValues({ scope, namespace: family.namespace, limit: 1000 }),
    );
    await valueChain(r, `scanValues session ${family.namespace} limit=2`, (after) =>
      s.scanValues({ scope, namespace: family.namespace, limit: 2, ...(after === undefined ? {} : { after }) }),
    );
  }
  for (const { namespace, key } of addressesOf(SESSION_LISTS)) {
    const addr = sessionList(namespace, key);
    await r.read(`readList ${addressLabel(addr)} all`, () => s.readList(addr, { limit: 1000 }));
    await r.chain(`readList ${addressLabel(addr)} forward limit=3`, { limit: 3 }, (q) => s.readList(addr, q), entryId);
    await r.chain(
      `readList ${addressLabel(addr)} backward limit=2`,
      { before: MAX, limit: 2 },
      (q) => s.readList(addr, q),
      entryId,
    );
  }

  // Tasks: every record by id, then every scan filter.
  const tasks = (await r.read("getTasks (every id)", () => s.getTasks(every))) ?? new Map();
  await r.read("getTasks (missing ids)", () => s.getTasks([0, lastSeq + 1]));
  const taskIds = [...tasks.keys()].sort((a, b) => a - b);
  await r.chain("scanTasks forward limit=4", { limit: 4 }, (q) => s.scanTasks(q), entryId);
  await r.chain("scanTasks backward limit=3", { before: MAX, limit: 3 }, (q) => s.scanTasks(q), entryId);
  await r.chain("scanTasks live=true limit=2", { limit: 2 }, (q) => s.scanTasks({ ...q, live: true }), entryId);
  const filters: [string, Omit<TaskQuery, keyof Cursor>][] = [
    ["all", {}],
    ["live=true", { live: true }],
    ["live=false", { live: false }],
    ["role=start", { role: "start" }],
    ["role=inflight", { role: "inflight" }],
    ["role=terminal", { role: "terminal" }],
    ["abort=true", { abort: true }],
    ["abort=false", { abort: false }],
    ["live=true abort=true", { live: true, abort: true }],
    ["conversationIds=[]", { conversationIds: [] }],
    ...TASK_KINDS.map((kind): [string, { kind: string }] => [`kind=${kind}`, { kind }]),
    ...TASK_KINDS.map((kind): [string, { kind: string; live: boolean }] => [
      `kind=${kind} live=true`,
      { kind, live: true },
    ]),
    ...conversationIds.map((c): [string, { conversationIds: Id[] }] => [
      `conversationIds=[${c}]`,
      { conversationIds: [c] },
    ]),
    ...conversationIds.map((c): [string, { conversationIds: Id[]; live: boolean }] => [
      `conversationIds=[${c}] live=true`,
      { conversationIds: [c], live: true },
    ]),
  ];
  if (conversationIds.length >= 2) {
    const pair = [conversationIds.at(-1) as Id, conversationIds[0] as Id];
    filters.push([`conversationIds=[${pair.join(",")}]`, { conversationIds: pair }]);
  }
  for (const [name, filter] of filters) {
    await r.read(
      `scanTasks ${name}`,
      () => s.scanTasks({ ...filter, limit: 1000 }),
      (p) => ({ ids: p.items.map(entryId), next: p.next, readAt: p.readAt }),
    );
  }

  // Scratch of every task: live tasks' current scratch, retired (empty) scratch of settled ones.
  for (const t of taskIds) {
    for (const { namespace, key } of addressesOf(SCRATCH_VALUES)) {
      const addr = scratchValue(t, namespace, key);
      await r.read(`getValue ${addressLabel(addr)}`, () => s.getValue(addr));
    }
    for (const family of SCRATCH_VALUES) {
      await r.read(`scanValues scratch=${t} ${family.namespace}`, () =>
        s.scanValues({ scope: { scratch: t }, namespace: family.namespace, limit: 1000 }),
      );
    }
    for (const { namespace, key } of addressesOf(SCRATCH_LISTS)) {
      const addr = scratchList(t, namespace, key);
      await r.read(`readList ${addressLabel(addr)} all`, () => s.readList(addr, { limit: 1000 }));
      await r.chain(
        `readList ${addressLabel(addr)} forward limit=2`,
        { limit: 2 },
        (q) => s.readList(addr, q),
        entryId,
      );
    }
  }

  await r.read(
    "entryKinds (sorted)",
    () => s.entryKinds(),
    (kinds) => [...kinds].sort(),
  );
  r.set("lastSeq after reads", s.lastSeq);

  if (options.probeNext === true) {
    await r.read("next: empty commit", () => s.commit({ kind: "main", writes: [] }));
    r.set("next: lastSeq after empty commit", s.lastSeq);
    const marker = sessionValue("contract.marker");
    await r.read("next: marker commit", () =>
      s.commit({ kind: "main", writes: [{ type: "value.set", addr: marker, value: "marker" }] }),
    );
    await r.read("next: marker value", () => s.getValue(marker));
    r.set("next: lastSeq after marker", s.lastSeq);
  }
  return r.dump;
}

/** scanValues pages by key: `after` = the last key, until a short page (scanValues never sets `next`). */
async function valueChain(
  r: Recorder,
  label: string,
  fetch: (after: string | undefined) => Promise<Page<{ key: string }>>,
): Promise<void> {
  const pages: unknown[] = [];
  let after: string | undefined;
  try {
    for (let n = 0; n < 100; n++) {
      const page = await fetch(after);
      pages.push({ keys: page.items.map((i) => i.key), next: page.next, readAt: page.readAt });
      const last = page.items.at(-1);
      if (last === undefined) break;
      after = last.key;
    }
  } catch (error) {
    pages.push({ error: describeError(error) });
  }
  r.set(label, pages);
}

export interface DiffOptions {
  /** Compare only labels for which this returns true. */
  readonly only?: (label: string) => boolean;
  /** How many differences to describe (default 8). */
  readonly limit?: number;
}

/** Labels whose reads differ (or exist on one side only), described for a failure message. */
export function diffDumps(expected: Dump, actual: Dump, options: DiffOptions = {}): string[] {
  const labels = [...expected.keys(), ...[...actual.keys()].filter((l) => !expected.has(l))];
  const out: string[] = [];
  const clip = (text: string | undefined): string =>
    text === undefined ? "<not read>" : text.length > 600 ? `${text.slice(0, 600)}… (${text.length} chars)` : text;
  let differing = 0;
  for (const label of labels) {
    if (options.only !== undefined && !options.only(label)) continue;
    const e = expected.get(label);
    const a = actual.get(label);
    if (e === a) continue;
    differing++;
    if (out.length < (options.limit ?? 8)) out.push(`${label}\n    expected: ${clip(e)}\n    actual:   ${clip(a)}`);
  }
  if (differing > out.length) out.push(`… and ${differing - out.length} more differing reads`);
  return out;
}
