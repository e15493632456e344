/**
 * A seeded, reproducible generator of VALID small mutation streams for the storage contract suite
 * (§10.1): sequences of CommitBatch a correct harness could produce. It keeps a `ModelStorage` as its
 * picture of committed state and stages every write into it while building, so ids, fork points, edit
 * targets, heads, remove targets and live tasks are always the ones storage will have assigned.
 *
 * What a stream contains: root conversations, forks at random transcript entries (including inherited
 * ones and "start" = 0), owned children (with and without inherited context) whose owner task records
 * them in `owns`; entries of several kinds and keys, some with head (at or after the previous visible
 * head's boundary), some with edits of earlier visible entries; tasks created, patched (role changes,
 * abort marks) and settled; session, sticky and rewindable values (set and delete) and lists (append,
 * remove, clear); scratch batches of live tasks; an occasional deleteConversation. Rewindable
 * conversation writes precede entries within a batch (§3.2), as the harness's builder enforces.
 *
 * The same seed always yields the same stream; the seed is in every test name that uses one.
 */
import type {
  Address,
  CommitBatch,
  Entry,
  Id,
  JsonValue,
  MainWrite,
  Message,
  StateWrite,
  Task,
} from "../../src/storage/records.js";
import { MainBuilder, ScratchBuilder, type EntryFields, type StateTx } from "./builder.js";
import { ModelStorage } from "./model.js";
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
  conversationList,
  conversationValue,
  scratchList,
  scratchValue,
  sessionList,
  sessionValue,
  type Family,
} from "./vocabulary.js";

/** sfc32: a small, fast, well-distributed 32-bit PRNG; the seed is spread by splitmix32 first. */
export class Rng {
  #a: number;
  #b: number;
  #c: number;
  #d: number;

  constructor(seed: number) {
    let s = seed >>> 0;
    const split = (): number => {
      s = (s + 0x9e3779b9) >>> 0;
      let z = s;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.#a = split();
    this.#b = split();
    this.#c = split();
    this.#d = split();
    for (let i = 0; i < 12; i++) this.next();
  }

  /** Uniform in [0, 1). */
  next(): number {
    const t = (((this.#a + this.#b) >>> 0) + this.#d) >>> 0;
    this.#d = (this.#d + 1) >>> 0;
    this.#a = this.#b ^ (this.#b >>> 9);
    this.#b = (this.#c + (this.#c << 3)) >>> 0;
    this.#c = ((this.#c << 21) | (this.#c >>> 11)) >>> 0;
    this.#c = (this.#c + t) >>> 0;
    return t / 4294967296;
  }

  /** Integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** Integer in [lo, hi]. */
  range(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error("rng: pick from an empty list");
    return items[this.int(items.length)] as T;
  }

  /** A small JSON value: scalars, short arrays and objects, occasionally null or unicode. */
  json(depth = 2): JsonValue {
    const r = this.int(depth > 0 ? 8 : 5);
    switch (r) {
      case 0:
        return this.int(1000) - 100;
      case 1:
        return this.pick(["x", "plan", "ünï", 'a"b', "", "line\nbreak"]);
      case 2:
        return this.chance(0.5);
      case 3:
        return null;
      case 4:
        return this.int(100) / 8;
      case 5:
      case 6: {
        const out: Record<string, JsonValue> = {};
        for (let i = this.int(3); i >= 0; i--) out[this.pick(["a", "b", "n", "zz", "ß"])] = this.json(depth - 1);
        return out;
      }
      default: {
        const out: JsonValue[] = [];
        for (let i = this.int(3); i > 0; i--) out.push(this.json(depth - 1));
        return out;
      }
    }
  }
}

export interface GeneratedBatch {
  readonly batch: CommitBatch;
  /** The range storage must return for it. */
  readonly first: Id;
  readonly last: Id;
}

export interface StreamOptions {
  /** Number of commits, including the occasional empty one. */
  readonly batches: number;
}

function message(rng: Rng, n: Id): Message {
  return { role: "user", content: `m${n}${rng.chance(0.2) ? " ✓" : ""}`, timestamp: 0 };
}

class Generator {
  readonly model = new ModelStorage();
  readonly rng: Rng;

  constructor(seed: number) {
    this.rng = new Rng(seed);
  }

  // -------------------------------------------------------------------------------------------
  // Picture of committed state

  #alive(): Id[] {
    return this.model.conversations().map((c) => c.id);
  }

  #live(): Task[] {
    return this.model.tasks().filter((t) => t.role !== "terminal");
  }

  #family(families: readonly Family[]): { namespace: string; key: string | undefined } {
    const family = this.rng.pick(families);
    return { namespace: family.namespace, key: this.rng.pick(family.keys) };
  }

  // -------------------------------------------------------------------------------------------
  // Writes

  #stateOps(tx: StateTx, value: () => Address, list: () => Address): void {
    const rng = this.rng;
    if (rng.chance(0.5)) {
      const addr = value();
      if (rng.chance(0.75)) tx.set(addr, rng.json());
      else tx.delete(addr);
      return;
    }
    const addr = list();
    const visible = this.model.listSync(addr);
    const r = rng.next();
    if (r < 0.65 || visible.length === 0) tx.append(addr, rng.json(1));
    else if (r < 0.88) tx.remove(addr, rng.pick(visible).id);
    else tx.clear(addr);
  }

  #entry(tx: MainBuilder, conversationId: Id): void {
    const rng = this.rng;
    const seq = tx.nextSeq;
    const transcript = this.model.transcript(conversationId);
    const fields: { -readonly [K in keyof EntryFields]: EntryFields[K] } = {};
    if (rng.chance(0.4)) fields.key = rng.pick(ENTRY_KEYS);
    if (rng.chance(0.7)) fields.data = { n: seq, v: rng.json(1) };
    if (rng.chance(0.6)) fields.model = [message(rng, seq)];
    const byTask = this.#live().filter((t) => t.conversationId === conversationId);
    if (byTask.length > 0 && rng.chance(0.3)) fields.byTaskId = rng.pick(byTask).id;
    let kind: string = rng.pick(ENTRY_KINDS);
    if (rng.chance(0.2)) {
      // A head: a visible entry (or this one) at or after the previous visible head's boundary.
      const previous = transcript.filter((e) => e.head !== undefined).at(-1)?.head ?? 0;
      const candidates = [...transcript.filter((e) => e.id >= previous).map((e) => e.id), seq];
      fields.head = rng.pick(candidates);
      kind = "summary";
    }
    if (transcript.length > 0 && rng.chance(0.15)) {
      const edits: Entry["edits"] = Array.from({ length: rng.range(1, 2) }, () => {
        const target = rng.pick(transcript).id;
        return rng.chance(0.5)
          ? { target, action: "omit" as const }
          : { target, action: "replace" as const, messages: [message(rng, target)] };
      });
      fields.edits = edits;
    }
    tx.entry(conversationId, kind, fields);
  }

  #main(): CommitBatch {
    const rng = this.rng;
    const tx = new MainBuilder(this.model.lastSeq, (seq, w) => this.model.stage(seq, w));
    let alive = this.#alive();
    let focus: Id | undefined = alive.length > 0 ? rng.pick(alive) : undefined;

    // Phase 0: conversations (roots, forks, owned children).
    if (focus === undefined || rng.chance(0.3)) {
      const live = this.#live();
      const r = rng.next();
      if (focus === undefined || r < 0.15) {
        focus = tx.conversation();
      } else if (r < 0.75 || live.length === 0) {
        const transcript = this.model.transcript(focus);
        const at = transcript.length === 0 || rng.chance(0.15) ? 0 : rng.pick(transcript).id;
        focus = tx.conversation({ parent: { conversationId: focus, at } });
      } else {
        const owner = rng.pick(live);
        const inherit = rng.chance(0.3) ? this.model.transcript(focus) : undefined;
        const parent = inherit === undefined ? undefined : { conversationId: focus, at: inherit.at(-1)?.id ?? 0 };
        const child = tx.conversation(parent === undefined ? { owner: owner.id } : { owner: owner.id, parent });
        // The owner records its child, in the same batch, after the creation (§5.7).
        tx.patch(
          owner.id,
          owner.role === "start" ? "start" : "inflight",
          { ...owner.state, child },
          {
            // Children deleted since are dropped: an owned conversation must exist (§7.3 structure).
            owns: [...(owner.owns ?? []).filter((id) => this.model.conversation(id) !== undefined), child],
          },
        );
        focus = child;
      }
      alive = this.#alive();
    }

    // Phase 1: rewindable conversation state, before any entry of the batch (§3.2).
    if (rng.chance(0.5)) {
      for (let i = rng.range(1, 2); i > 0; i--) {
        const c = rng.chance(0.7) ? focus : rng.pick(alive);
        this.#stateOps(
          tx,
          () => {
            const f = this.#family(REWIND_VALUES);
            return conversationValue(c, f.namespace, f.key, true);
          },
          () => {
            const f = this.#family(REWIND_LISTS);
            return conversationList(c, f.namespace, f.key, true);
          },
        );
      }
    }

    // Phase 2: entries.
    if (rng.chance(0.75)) {
      for (let i = rng.range(1, 3); i > 0; i--) this.#entry(tx, focus);
    }

    // Phase 3: tasks, sticky and session state.
    if (rng.chance(0.4)) {
      const tasks = this.model.tasks();
      const c = rng.chance(0.7) ? focus : rng.pick(alive);
      tx.task(c, rng.pick(TASK_KINDS), {
        role: rng.chance(0.8) ? "start" : "inflight",
        state: { status: "pending", at: tx.nextSeq - 1 },
        after: tasks.length > 0 && rng.chance(0.25) ? [rng.pick(tasks).id] : [],
        ...(rng.chance(0.2) ? { background: true as const } : {}),
        ...(rng.chance(0.2) ? { turn: true as const } : {}),
      });
    }
    if (rng.chance(0.35)) {
      const live = this.#live();
      if (live.length > 0) {
        const t = rng.pick(live);
        tx.patch(
          t.id,
          rng.chance(0.3) ? "start" : "inflight",
          { status: "running", step: tx.nextSeq },
          rng.chance(0.25) ? { abort: true } : {},
        );
      }
    }
    if (rng.chance(0.25)) {
      const live = this.#live();
      if (live.length > 0)
        tx.settle(rng.pick(live).id, { status: rng.pick(["done", "failed", "aborted"]), at: tx.nextSeq });
    }
    if (rng.chance(0.4)) {
      for (let i = rng.range(1, 2); i > 0; i--) {
        if (rng.chance(0.5)) {
          this.#stateOps(
            tx,
            () => {
              const f = this.#family(SESSION_VALUES);
              return sessionValue(f.namespace, f.key);
            },
            () => {
              const f = this.#family(SESSION_LISTS);
              return sessionList(f.namespace, f.key);
            },
          );
        } else {
          const c = rng.chance(0.7) ? focus : rng.pick(alive);
          this.#stateOps(
            tx,
            () => {
              const f = this.#family(STICKY_VALUES);
              return conversationValue(c, f.namespace, f.key, false);
            },
            () => {
              const f = this.#family(STICKY_LISTS);
              return conversationList(c, f.namespace, f.key, false);
            },
          );
        }
      }
    }
    if (tx.size === 0) this.#entry(tx, focus);
    return tx.batch();
  }

  #scratch(task: Task): CommitBatch {
    const rng = this.rng;
    const tx = new ScratchBuilder(this.model.lastSeq, task.id, (seq, w) => this.model.stage(seq, w));
    // A new attempt starts clean (§4.6).
    if (rng.chance(0.15)) tx.clear(scratchList(task.id, "frames"));
    for (let i = rng.range(1, 4); i > 0; i--) {
      this.#stateOps(
        tx,
        () => {
          const f = this.#family(SCRATCH_VALUES);
          return scratchValue(task.id, f.namespace, f.key);
        },
        () => {
          const f = this.#family(SCRATCH_LISTS);
          return scratchList(task.id, f.namespace, f.key);
        },
      );
    }
    return tx.batch();
  }

  #delete(): CommitBatch | undefined {
    const liveConversations = new Set(this.#live().map((t) => t.conversationId));
    const alive = this.#alive();
    const deletable = alive.filter((id) => !liveConversations.has(id));
    if (alive.length < 3 || deletable.length === 0) return undefined;
    const tx = new MainBuilder(this.model.lastSeq, (seq, w) => this.model.stage(seq, w));
    tx.deleteConversation(this.rng.pick(deletable));
    return tx.batch();
  }

  step(): CommitBatch {
    const r = this.rng.next();
    const live = this.#live();
    if (r < 0.02) return { kind: "main", writes: [] };
    if (r < 0.06) {
      const deleted = this.#delete();
      if (deleted !== undefined) return deleted;
    }
    if (r < 0.3 && live.length > 0) return this.#scratch(this.rng.pick(live));
    return this.#main();
  }
}

/**
 * Generate `options.batches` commits from `seed`. The stream is re-checked by replaying it into a fresh
 * model through the shared structural check, so a generator bug shows up here, not as a backend failure.
 */
export function generateStream(seed: number, options: StreamOptions): GeneratedBatch[] {
  const generator = new Generator(seed);
  const out: GeneratedBatch[] = [];
  for (let i = 0; i < options.batches; i++) {
    const first = generator.model.lastSeq + 1;
    const batch = generator.step();
    out.push({ batch, first, last: first + batch.writes.length - 1 });
  }
  const check = new ModelStorage();
  for (const [i, { batch, first, last }] of out.entries()) {
    const range = check.commitSync(batch);
    if (range.first !== first || range.last !== last)
      throw new Error(`generator seed ${seed}: batch ${i} range mismatch`);
  }
  return out;
}

/** Every write of a stream, for tests that want to know what it contains. */
export function writesOf(stream: readonly GeneratedBatch[]): (MainWrite | StateWrite)[] {
  return stream.flatMap((b) => [...b.batch.writes]);
}
