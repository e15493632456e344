/**
 * Task kinds' types (§5.1, §5.2, §9.2): the compile-time machinery that keeps a kind's status/payload
 * union and literal roles map attached to its tasks, the derived `orphaned` variant, the exact-write
 * typing of `patch`/`settle`, the kind's declared hooks, config and preview, the erased `AnyTaskKind`
 * the driver runs, `roleOf`, and the registry that maps names to kinds. `defineTaskKind` (task-kind.ts)
 * builds a typed kind; transactions, hooks and the driver import the types from here.
 */
import type { Id, Task, TaskRole, TaskStateBase } from "../storage/records.js";
import type { Call } from "./call.js";
import { PicoError } from "./errors.js";
import type { ListHandle, ValueHandle } from "./handles.js";
import type { ListRef, ValueRef, ValueSpec } from "./state.js";

export type TaskRoles<S extends TaskStateBase> = Readonly<Record<S["status"], TaskRole>>;

declare const taskType: unique symbol;

/** Compiler-only witness; never populated or serialized. */
export interface TaskType<S extends TaskStateBase, R extends TaskRoles<S>> {
  readonly [taskType]?: { readonly state: (state: S) => S; readonly roles: R };
}

export type TypedTask<S extends TaskStateBase, R extends TaskRoles<S>> = Task<S> & TaskType<S, R>;

export interface TaskDefinition<S extends TaskStateBase, R extends TaskRoles<S>> extends TaskType<S, R> {
  readonly kind: string;
  readonly roles: R;
}

/** Keys present in every variant, with their types and optionality (§5.1). */
export type CommonPayload<S extends TaskStateBase> = Pick<S, Exclude<keyof S, "status">>;
export type Orphaned<S extends TaskStateBase> = CommonPayload<S> & { readonly status: "orphaned" };

export type ReadTask<S extends TaskStateBase, R extends TaskRoles<S>> = TypedTask<
  S | Orphaned<S>,
  R & { readonly orphaned: "terminal" }
>;

export type TaskState<K> = K extends TaskDefinition<infer S, infer _R> ? S | Orphaned<S> : never;

/** The declared variants whose role is `Role`; orphaned is never a public write target. */
export type StatesWithRole<
  S extends TaskStateBase,
  R extends TaskRoles<S>,
  Role extends TaskRole,
> = S extends TaskStateBase
  ? S["status"] extends "orphaned"
    ? never
    : R[S["status"]] extends Role
      ? S
      : never
  : never;

/** Status and payload stay correlated even when callers pass unions. */
export type WriteArgs<S extends TaskStateBase> = S extends TaskStateBase
  ? [status: S["status"], payload: Omit<S, "status">]
  : never;

/** Rejects extra top-level payload keys, including a duplicated status. */
export type ExactWrite<S extends TaskStateBase, A extends WriteArgs<S>> = A &
  [status: A[0], payload: Record<Exclude<keyof A[1], keyof Omit<Extract<S, { status: A[0] }>, "status">>, never>];

// ---------------------------------------------------------------------------------------------
// Hooks and config declared on kinds (§5.2, §8.7)

export type HookPoints = Record<string, { input: unknown; output: unknown }>;
export type HookSpecs<H extends HookPoints> = { readonly [P in keyof H]?: { readonly failClosed?: boolean } };

export type ConfigSpec = Readonly<Record<string, ValueSpec<unknown>>>;
export type ConfigValues<C extends ConfigSpec> = {
  readonly [K in keyof C]: C[K] extends ValueSpec<infer T> ? T | undefined : never;
};

/** What the driver hands a running invocation; the full interface is `TaskRuntime` (runtime.ts). */
export interface TaskRuntimeLike {
  readonly taskId: Id;
}

/** Read-only access to a task's durable state, scratch included (specs bind to the task), for `preview.init`. */
export interface ScratchReader {
  value<T>(addr: ValueRef<T>): Pick<ValueHandle<T>, "get">;
  list<T>(addr: ListRef<T>): Pick<ListHandle<T>, "read">;
}

/**
 * A kind's preview (§5.2, §9.4): built once when an execute or recover invocation starts, from durable
 * scratch, so a watcher reconnecting after a restart sees the partial before any new output; the first
 * flush is the base. Afterwards the kind mutates `runtime.preview`'s state in place.
 */
export interface PreviewSpec<P extends object = object> {
  /** `task` is the record the invocation starts from (a status that never wrote scratch need not read it). */
  init(scratch: ScratchReader, call: Call, task: Task): Promise<P>;
}

/** A task kind: its statuses, roles and behaviour (§5.2). `Runtime` is the driver's TaskRuntime. */
export interface TaskKind<
  S extends TaskStateBase,
  R extends TaskRoles<S> = TaskRoles<S>,
  Runtime extends TaskRuntimeLike = TaskRuntimeLike,
  Hooks extends HookPoints = HookPoints,
  Config extends ConfigSpec = ConfigSpec,
> extends TaskDefinition<S, R> {
  readonly initialStatus: StatesWithRole<S, R, "start">["status"];
  is(task: Task | undefined): task is ReadTask<S, R>;
  readonly turn?: true;
  readonly hooks?: HookSpecs<Hooks>;
  readonly config?: Config;
  readonly preview?: PreviewSpec;
  readonly needs?: KindNeeds;
  /**
   * For a status whose execute (or, for an inflight status, recover) first sleeps until a durable time
   * (a schedule's nextRunAt, a recurring job's notBefore, the witness's next patrol) and does nothing
   * before that: the time. The driver then counts the invocation as parked from its dispatch, so its
   * wake time is known at once, a host arms no busy heartbeat for it and counts no kill for it until it
   * wakes: a kill before it sleeps loses nothing, since the method re-runs from the top and
   * the alarm at that time reopens the object. The method must call runtime.sleep(time) first (it
   * returns at once when the time has passed); reading durable state before it is allowed. `Infinity`:
   * the method sleeps with no wake time (runtime.sleep(Infinity)) until a route's commit interrupts it
   * (a paused schedule): no alarm is armed for it.
   */
  sleepsUntil?(state: S): number | undefined;
  execute(task: TypedTask<S, R>, runtime: Runtime, call: Call): Promise<void>;
  recover(task: TypedTask<S, R>, runtime: Runtime, call: Call): Promise<void>;
  abort(task: TypedTask<S, R>, runtime: Runtime, call: Call): Promise<void>;
}

/**
 * Registrations a kind's methods rely on (§9.6): entry kinds it writes or reads typed, sections its
 * preparations edit. A live task of a kind whose needs are not all registered is parked (not started,
 * not recovered, not counted for idleness) until a registration supplies them, as a task of a missing
 * kind is (§6.4).
 */
export interface KindNeeds {
  readonly entryKinds?: readonly string[];
  readonly sections?: readonly string[];
}

/** Any registered kind, erased for the registry and the driver. */
export interface AnyTaskKind {
  readonly kind: string;
  readonly roles: Readonly<Record<string, TaskRole>>;
  readonly initialStatus: string;
  readonly turn?: true;
  readonly hooks?: Readonly<Record<string, { readonly failClosed?: boolean } | undefined>>;
  readonly config?: ConfigSpec;
  readonly preview?: PreviewSpec;
  readonly needs?: KindNeeds;
  sleepsUntil?(state: Task["state"]): number | undefined;
  execute(task: Task, runtime: never, call: Call): Promise<void>;
  recover(task: Task, runtime: never, call: Call): Promise<void>;
  abort(task: Task, runtime: never, call: Call): Promise<void>;
}

/** The role of `status` in a kind, or an error naming what is wrong (`orphaned` is never writable). */
export function roleOf(
  kind: { readonly kind: string; readonly roles: Readonly<Record<string, TaskRole>> },
  status: string,
): TaskRole {
  if (status === "orphaned")
    throw new PicoError("invalid_commit", `orphaned is written only by the harness at open (§5.1)`);
  const role = Object.hasOwn(kind.roles, status) ? kind.roles[status] : undefined;
  if (role === undefined) throw new PicoError("invalid_commit", `task kind ${kind.kind} has no status ${status}`);
  return role;
}

// ---------------------------------------------------------------------------------------------
// Mutable registration (§9.6)

export class TaskKindRegistry {
  readonly #kinds = new Map<string, AnyTaskKind>();

  constructor(initial: readonly AnyTaskKind[] = []) {
    for (const kind of initial) this.register(kind);
  }

  register(kind: AnyTaskKind): void {
    if (this.#kinds.has(kind.kind)) throw new PicoError("conflict", `task kind ${kind.kind} is already registered`);
    this.#kinds.set(kind.kind, kind);
  }

  /** A replacement must understand its predecessor's persisted statuses (§5.2). */
  replace(kind: AnyTaskKind): void {
    const previous = this.#kinds.get(kind.kind);
    if (previous === undefined) throw new PicoError("not_found", `task kind ${kind.kind} is not registered`);
    const missing = Object.keys(previous.roles).filter((status) => !Object.hasOwn(kind.roles, status));
    if (missing.length > 0) {
      throw new PicoError(
        "conflict",
        `replacement ${kind.kind} lacks persisted statuses ${missing.join(", ")}; migrate first`,
      );
    }
    this.#kinds.set(kind.kind, kind);
  }

  remove(name: string): void {
    if (!this.#kinds.delete(name)) throw new PicoError("not_found", `task kind ${name} is not registered`);
  }

  get(name: string): AnyTaskKind | undefined {
    return this.#kinds.get(name);
  }

  has(name: string): boolean {
    return this.#kinds.has(name);
  }

  names(): string[] {
    return [...this.#kinds.keys()];
  }
}

/** Erase a typed kind for the registry. */
export function erase<
  S extends TaskStateBase,
  R extends TaskRoles<S>,
  Runtime extends TaskRuntimeLike,
  H extends HookPoints,
  C extends ConfigSpec,
>(kind: TaskKind<S, R, Runtime, H, C>): AnyTaskKind {
  return kind as unknown as AnyTaskKind;
}
