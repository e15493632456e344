/**
 * Task kinds (§5.1, §5.2, §9.2): `defineTaskKind` with its compile-time and runtime checks, and (re-
 * exported from task-kind-types.ts) the types that keep a kind's status/payload union and roles map
 * attached to its tasks, `roleOf` and the registry. It sits above the task runtime, whose `TaskRuntime`
 * is a kind's default runtime type; lower modules import task-kind-types.ts instead.
 */
import type { Task, TaskStateBase } from "../storage/records.js";
import { PicoError } from "./errors.js";
import type { TaskRuntime } from "./runtime.js";
import type { ConfigSpec, HookPoints, ReadTask, TaskKind, TaskRoles, TaskRuntimeLike } from "./task-kind-types.js";

export * from "./task-kind-types.js";

// ---------------------------------------------------------------------------------------------
// defineTaskKind

type Equals<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type CommonKeys<S> = Exclude<keyof S, "status">;
type VariantAgrees<V, All, K extends keyof All> = V extends unknown
  ? Equals<Pick<V, K & keyof V>, Pick<All, K>>
  : never;
/** Common fields whose type or optionality differs between variants. */
export type InconsistentCommonFields<S extends TaskStateBase> = {
  [K in CommonKeys<S>]: false extends VariantAgrees<S, S, K> ? K : never;
}[CommonKeys<S>];

type KindChecks<S extends TaskStateBase> = "orphaned" extends S["status"]
  ? { readonly error: "orphaned is derived by the harness and cannot be declared (§5.1)" }
  : [InconsistentCommonFields<S>] extends [never]
    ? unknown
    : {
        readonly error: "common fields must have the same type and optionality in every variant";
        readonly fields: InconsistentCommonFields<S>;
      };

/** What `defineTaskKind` takes: the kind as it will be, less `is` (built here), with exact roles. */
type DefinitionInput<
  S extends TaskStateBase,
  R extends TaskRoles<S>,
  Runtime extends TaskRuntimeLike,
  Hooks extends HookPoints,
  Config extends ConfigSpec,
> = Omit<TaskKind<S, R, Runtime, Hooks, Config>, "is" | "roles"> & {
  /** Exactly one role per declared status. */
  readonly roles: R & Record<Exclude<keyof R, S["status"]>, never>;
};

const ROLE_NAMES: ReadonlySet<string> = new Set(["start", "inflight", "terminal"]);

/**
 * Define a task kind. The first call binds the declared state union (and runtime, hook and config
 * types); the second infers the literal roles map.
 *
 * @example
 * type S = { status: "planned"; n: number } | { status: "done"; n: number };
 * const k = defineTaskKind<S>()({ kind: "count", roles: { planned: "start", done: "terminal" },
 *   initialStatus: "planned", execute, recover, abort });
 */
export function defineTaskKind<
  S extends TaskStateBase,
  Runtime extends TaskRuntimeLike = TaskRuntime,
  Hooks extends HookPoints = HookPoints,
  Config extends ConfigSpec = ConfigSpec,
>() {
  return <const R extends TaskRoles<S>>(
    definition: DefinitionInput<S, R, Runtime, Hooks, Config> & KindChecks<S>,
  ): TaskKind<S, R, Runtime, Hooks, Config> => {
    const roles = definition.roles as Readonly<Record<string, unknown>>;
    if (definition.kind === "") throw new PicoError("invalid_commit", "a task kind needs a name");
    if (Object.hasOwn(roles, "orphaned")) {
      throw new PicoError("invalid_commit", `task kind ${definition.kind} declares orphaned; it is derived (§5.1)`);
    }
    for (const [status, role] of Object.entries(roles)) {
      if (typeof role !== "string" || !ROLE_NAMES.has(role)) {
        throw new PicoError(
          "invalid_commit",
          `task kind ${definition.kind}: status ${status} has unknown role ${String(role)}`,
        );
      }
    }
    if (roles[definition.initialStatus] !== "start") {
      throw new PicoError(
        "invalid_commit",
        `task kind ${definition.kind}: initial status ${definition.initialStatus} must have role start`,
      );
    }
    const kind = definition.kind;
    return Object.freeze({
      ...definition,
      is: (task: Task | undefined): task is ReadTask<S, R> => task !== undefined && task.kind === kind,
    }) as TaskKind<S, R, Runtime, Hooks, Config>;
  };
}
