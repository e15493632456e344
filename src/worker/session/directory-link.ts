/**
 * The session object's side of the tenant directory (docs/api.md "Directory"): it keeps the
 * session's directory row (name, owner, title, labels, metadata, status, createdAt) in the object's synchronous KV
 * storage and sends the whole row to the tenant's DirectoryObject on create, on title/labels/metadata changes, on
 * delete, and on activity at most once per ACTIVITY_INTERVAL_MS. The status (idle, busy, faulted) rides the activity
 * update: a turn's busy and idle are commits, so they go out with the activity they are part of, and a turn costs no
 * send of its own. A change no commit carries (a fault, a quarantine, an operator's clear, what an open finds) is
 * sent at once, and only when the status differs from the one recorded. Every upsert carries the session's counters
 * for `GET /v1/stats` (live and quarantined tasks, outbox backlog and dead deliveries, pending items and their earliest
 * deadline), read when it is sent: what commits change goes out with the activity update, and an outbox delivery round
 * (no commit) asks for an update the same way (`counted`), so the directory's counters are at most ACTIVITY_INTERVAL_MS
 * behind the session, plus the retry backoff while the directory cannot be reached. An update the directory does not acknowledge stays
 * pending in KV and is retried from the session's alarm (backing off up to RETRY_MAX_MS) until it is,
 * so a session created once and never used again still appears.
 *
 * Nothing here knows Hono; the SessionObject wires it to its alarm plan and its commits.
 */
import type { Clock } from "../../core/host.js";
import type { DirectoryUpdate, SessionCounters } from "../directory/object.js";
import type { SessionStatus } from "../schemas.js";

/** Activity updates per session are at most this frequent. */
export const ACTIVITY_INTERVAL_MS = 60_000;
export const RETRY_FIRST_MS = 1_000;
export const RETRY_MAX_MS = 60_000;

const KEY = "edge.directory";

/** The durable row state (KV). */
interface LinkState {
  readonly tenant: string;
  readonly session: string;
  readonly createdAt: number;
  /** The end user who created it (docs/users.md); absent: the tenant's. */
  readonly owner?: string;
  readonly title?: string;
  readonly labels: readonly string[];
  /** Absent in rows written before metadata: none. */
  readonly metadata?: Readonly<Record<string, string>>;
  /** The status last sent or being sent (absent in rows written before it: idle). */
  readonly status?: SessionStatus;
  readonly deleted: boolean;
  /** The last update's version (sender clock, strictly increasing). */
  readonly version: number;
  /** When the directory last acknowledged an activity update. */
  readonly lastSentAt: number;
  readonly lastActivityAt: number;
  /** A pending update is due at this time (absent: nothing pending). */
  readonly dueAt?: number;
  readonly attempt: number;
  /** Bumped by every change of the row's fields (title, labels, metadata, status, deletion): a send acknowledges one edit. */
  readonly edit: number;
}

export interface DirectoryLinkDeps {
  readonly kv: SyncKvStorage;
  readonly clock: Clock;
  /** Send one update to the tenant's directory; resolves when acknowledged. */
  readonly send: (tenant: string, update: DirectoryUpdate) => Promise<unknown>;
  /** Ask the tenant's directory to unlink a session it lists (versioned by `version`); whether it did. */
  readonly unlink: (tenant: string, session: string, version: number) => Promise<{ readonly unlinked: boolean }>;
  /** The session's live task count (0 when it is not open). */
  readonly liveTasks: () => Promise<number>;
  /** The session's counters for GET /v1/stats (undefined when it is not open: the update then carries none). */
  readonly counters: () => Promise<SessionCounters | undefined>;
  /** The pending update's due time changed (undefined: nothing pending): arm the alarm for it. */
  readonly due: (at: number | undefined) => void;
  readonly report: (error: unknown) => void;
}

/** A new session's row as its create (or import) gives it. */
export interface LinkRow {
  readonly tenant: string;
  readonly session: string;
  readonly owner?: string | undefined;
  readonly title?: string;
  readonly labels?: readonly string[];
  readonly metadata?: Readonly<Record<string, string>>;
}

/** What `GET /v1/sessions/{s}` and PATCH answer of the directory row. */
export interface DirectoryMeta {
  readonly title?: string;
  readonly labels: readonly string[];
  readonly metadata: Readonly<Record<string, string>>;
}

/**
 * `current` with `patch` merged in (a value sets a key, null deletes it); undefined `patch`: unchanged. The caller
 * checks the result's size before anything is written.
 */
export function mergeMetadata(
  current: Readonly<Record<string, string>>,
  patch: Readonly<Record<string, string | null>> | undefined,
): Readonly<Record<string, string>> {
  if (patch === undefined) return current;
  const out: Record<string, string> = { ...current };
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else out[key] = value;
  }
  return out;
}

export class DirectoryLink {
  readonly #deps: DirectoryLinkDeps;
  #sending: Promise<void> | undefined;
  /** The latest commit's time in this instance (undefined: none since the last send). */
  #activity: number | undefined;
  /** The status after the latest commit, when it differs from the row's (memory only, like `#activity`). */
  #status: SessionStatus | undefined;

  constructor(deps: DirectoryLinkDeps) {
    this.#deps = deps;
  }

  /** The session's tenant and name, once created over HTTP (for log lines). */
  get where(): { readonly tenant: string; readonly session: string } | undefined {
    const state = this.#state();
    return state === undefined ? undefined : { tenant: state.tenant, session: state.session };
  }

  /** The last activity the row holds (a commit at most ACTIVITY_INTERVAL_MS later may be in memory only). */
  get lastActivityAt(): number | undefined {
    const state = this.#state();
    return state === undefined || state.deleted ? undefined : Math.max(state.lastActivityAt, this.#activity ?? 0);
  }

  /** When the session was created over HTTP (epoch ms; undefined: it was not, or it is deleted). */
  get createdAt(): number | undefined {
    const state = this.#state();
    return state === undefined || state.deleted ? undefined : state.createdAt;
  }

  /** The pending due time, if any (the alarm plan's directory reason). */
  get dueAt(): number | undefined {
    return this.#state()?.dueAt;
  }

  /** A session was created: remember its row and announce it now. */
  created(row: LinkRow): Promise<void> {
    this.record(row);
    return this.flush();
  }

  /**
   * Remember a new session's row, pending (due now), without sending it: synchronous, so it can join the transaction
   * that creates the session (an import's settling); `flush`, or the alarm the next open arms, sends it.
   */
  record(row: LinkRow): void {
    const now = this.#deps.clock.now();
    this.#put({
      tenant: row.tenant,
      session: row.session,
      createdAt: now,
      ...(row.owner === undefined ? {} : { owner: row.owner }),
      ...(row.title === undefined ? {} : { title: row.title }),
      labels: row.labels ?? [],
      metadata: row.metadata ?? {},
      status: "idle",
      deleted: false,
      version: 0,
      lastSentAt: 0,
      lastActivityAt: now,
      dueAt: now,
      attempt: 0,
      edit: (this.#state()?.edit ?? 0) + 1,
    });
  }

  /** Title, labels and metadata as stored (undefined when the session has no directory row, e.g. created by RPC). */
  meta(): DirectoryMeta | undefined {
    const state = this.#state();
    return state === undefined
      ? undefined
      : {
          ...(state.title === undefined ? {} : { title: state.title }),
          labels: state.labels,
          metadata: state.metadata ?? {},
        };
  }

  /** The status the directory was last given or is about to be (undefined: no row). */
  get recordedStatus(): SessionStatus | undefined {
    const state = this.#state();
    return state === undefined ? undefined : (this.#status ?? state.status ?? "idle");
  }

  /** Change title, labels and/or metadata (`null` title clears it; `metadata` is the whole new map) and announce now. */
  relabel(change: {
    title?: string | null;
    labels?: readonly string[];
    metadata?: Readonly<Record<string, string>>;
  }): Promise<void> {
    const state = this.#state();
    if (state === undefined || state.deleted) return Promise.resolve();
    const { title: _old, ...rest } = state;
    const title = change.title === undefined ? state.title : change.title === null ? undefined : change.title;
    this.#put({
      ...rest,
      ...(title === undefined ? {} : { title }),
      labels: change.labels ?? state.labels,
      metadata: change.metadata ?? state.metadata ?? {},
      edit: state.edit + 1,
    });
    return this.flush();
  }

  /**
   * The session's status changed without a commit to carry it (a fault, a quarantine, an operator's clear, an open):
   * send it now if it differs from the recorded one. One KV write and one send per change, never per commit.
   */
  status(next: SessionStatus): void {
    const state = this.#state();
    if (state === undefined || state.deleted || this.recordedStatus === next) return;
    this.#status = undefined;
    this.#put({ ...state, status: next, dueAt: this.#deps.clock.now(), edit: state.edit + 1 });
    void this.flush();
  }

  /**
   * A commit happened, after which the session's status is `status`: send at once if the last activity update is a
   * minute old, else schedule it; the status goes with it.
   */
  activity(status?: SessionStatus): void {
    const state = this.#state();
    if (state === undefined || state.deleted) return;
    const now = this.#deps.clock.now();
    // While an update is pending, activity and status are kept in memory (no write per commit); the send takes them.
    this.#activity = now;
    if (status !== undefined) this.#status = status === (state.status ?? "idle") ? undefined : status;
    if (state.dueAt !== undefined) return;
    const next = state.lastSentAt + ACTIVITY_INTERVAL_MS;
    this.#put({ ...state, lastActivityAt: now, dueAt: Math.max(next, now) });
    if (next <= now) void this.flush();
    else this.#deps.due(next);
  }

  /**
   * Something the counters count changed without a commit (an outbox delivery round): send an update with the next
   * activity update, at most once per ACTIVITY_INTERVAL_MS, without moving the session's activity time.
   */
  counted(): void {
    const state = this.#state();
    if (state === undefined || state.deleted || state.dueAt !== undefined) return;
    const now = this.#deps.clock.now();
    const next = state.lastSentAt + ACTIVITY_INTERVAL_MS;
    this.#put({ ...state, dueAt: Math.max(next, now) });
    if (next <= now) void this.flush();
    else this.#deps.due(next);
  }

  /** The session is being deleted: its storage goes, then the tombstone is sent (and kept until acknowledged). */
  deleted(state: LinkState | undefined): Promise<void> {
    if (state === undefined) {
      this.#cached = null;
      return Promise.resolve();
    }
    this.#put({ ...state, deleted: true, dueAt: this.#deps.clock.now(), attempt: 0, edit: state.edit + 1 });
    return this.flush();
  }

  /**
   * A delete of a session this object does not hold: if the directory still lists it (a delete was cut between its
   * wipe and its tombstone), unlink it now. Whether it was listed; throws when the directory cannot answer, because
   * then nobody can tell an orphan from an unknown name.
   */
  async orphaned(where: { readonly tenant: string; readonly session: string }): Promise<boolean> {
    const { unlinked } = await this.#deps.unlink(where.tenant, where.session, this.#deps.clock.now());
    return unlinked;
  }

  /** Read the state before `deleteAll` wipes it (then pass it to `deleted`). */
  snapshot(): LinkState | undefined {
    return this.#state();
  }

  /** The alarm fired: send a pending update that is due. */
  async alarm(): Promise<void> {
    const due = this.dueAt;
    if (due !== undefined && due <= this.#deps.clock.now()) await this.flush();
    else this.#deps.due(due);
  }

  /** Send the current row; on failure keep it pending with a backed-off due time. One send at a time. */
  flush(): Promise<void> {
    const run = async (): Promise<void> => {
      if (this.#sending !== undefined) await this.#sending.catch(() => undefined);
      const before = this.#state();
      if (before === undefined) return;
      const liveTasks = before.deleted ? 0 : await this.#deps.liveTasks();
      const counters = before.deleted ? undefined : await this.#deps.counters();
      // Re-read after the await: the row is sent and versioned as it is now.
      const read = this.#state();
      if (read === undefined) return;
      const state = {
        ...read,
        lastActivityAt: Math.max(read.lastActivityAt, this.#activity ?? 0),
        status: this.#status ?? read.status ?? "idle",
      };
      this.#activity = undefined;
      this.#status = undefined;
      const now = this.#deps.clock.now();
      const version = Math.max(now, state.version + 1);
      const update: DirectoryUpdate = state.deleted
        ? { type: "delete", version, session: state.session }
        : {
            type: "upsert",
            version,
            session: state.session,
            owner: state.owner,
            title: state.title,
            labels: state.labels,
            metadata: state.metadata ?? {},
            status: state.status ?? "idle",
            createdAt: state.createdAt,
            lastActivityAt: state.lastActivityAt,
            liveTasks,
            ...(counters === undefined ? {} : { counters }),
          };
      this.#put({ ...state, version });
      try {
        await this.#deps.send(state.tenant, update);
      } catch (error) {
        this.#deps.report(error);
        const current = this.#state();
        if (current === undefined) return;
        const delay = Math.min(RETRY_FIRST_MS * 2 ** current.attempt, RETRY_MAX_MS);
        const dueAt = this.#deps.clock.now() + delay;
        this.#put({ ...current, dueAt, attempt: current.attempt + 1 });
        this.#deps.due(dueAt);
        return;
      }
      const current = this.#state();
      if (current === undefined) return;
      // A change made while sending is newer than the row acknowledged: it stays pending (an edit at
      // once, later activity after the interval).
      const edited = current.edit !== state.edit;
      if (current.deleted && !edited) {
        this.#deps.kv.delete(KEY);
        this.#cached = undefined;
        this.#deps.due(undefined);
        return;
      }
      const dueAt = edited ? now : this.#activity !== undefined ? now + ACTIVITY_INTERVAL_MS : undefined;
      const { dueAt: _due, ...rest } = current;
      this.#put({
        ...rest,
        lastActivityAt: Math.max(current.lastActivityAt, state.lastActivityAt),
        lastSentAt: now,
        attempt: 0,
        ...(dueAt === undefined ? {} : { dueAt }),
      });
      this.#deps.due(dueAt);
    };
    const sending = run();
    this.#sending = sending;
    return sending;
  }

  /**
   * The row as last read or written by this instance (`null`: not read yet). Every write of the key goes through
   * this class, and the object's own `deleteAll` is followed by `deleted` (which writes the tombstone), so the copy
   * is the stored row and a commit's `activity` reads no storage.
   */
  #cached: LinkState | undefined | null = null;

  #state(): LinkState | undefined {
    if (this.#cached === null) this.#cached = this.#deps.kv.get<LinkState>(KEY);
    return this.#cached;
  }

  #put(state: LinkState): void {
    this.#deps.kv.put(KEY, state);
    this.#cached = state;
  }
}

/**
 * What `relabel` answers: `meta` and `variables`, and the directory meta's own fields beside them as well, which is
 * what the previous release's Worker reads (its `relabel` answered the meta itself): during a rollout a Worker of
 * either version calls this object (docs/operations.md "Version skew").
 */
export type RelabelAnswer = Partial<DirectoryMeta> & {
  readonly meta?: DirectoryMeta;
  readonly variables?: Record<string, string>;
};
