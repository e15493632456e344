/**
 * Type tests for task kinds and exact writes (§5.1, §5.2, §9.2). They run as part of the type-check:
 * every `@ts-expect-error` below must be an error, or tsc reports the directive as unused.
 */
import { defineTaskKind, type Orphaned, type ReadTask, type TaskState } from "../../src/core/task-kind.js";
import type { ConversationTx } from "../../src/core/tx.js";
import type { JsonObject } from "../../src/storage/records.js";

type Call = { id: string; name: string; arguments: JsonObject };

type ToolStates =
  | { status: "planned"; call: Call; assistant: number }
  | { status: "running"; call: Call; assistant: number; args: JsonObject; replay: "safe" | "never"; jobId?: number }
  | { status: "done"; call: Call; assistant: number; output: string; result: number }
  | { status: "aborted"; call: Call; assistant: number; output: string; result: number };

const noop = async (): Promise<void> => undefined;

const toolKind = defineTaskKind<ToolStates>()({
  kind: "tool",
  roles: { planned: "start", running: "inflight", done: "terminal", aborted: "terminal" },
  initialStatus: "planned",
  execute: noop,
  recover: noop,
  abort: noop,
});

// The literal roles map is inferred, not widened.
const roles: {
  readonly planned: "start";
  readonly running: "inflight";
  readonly done: "terminal";
  readonly aborted: "terminal";
} = toolKind.roles;
void roles;

// orphaned carries only the fields common to every variant.
type O = Orphaned<ToolStates>;
const orphan: O = { status: "orphaned", call: { id: "c", name: "n", arguments: {} }, assistant: 1 };
void orphan;
// @ts-expect-error a variant-specific field is not exposed on orphaned
const orphanOutput: O["output"] = "x";
void orphanOutput;

// Typed reads include orphaned and narrow on status.
declare const read: ReadTask<ToolStates, typeof toolKind.roles>;
switch (read.state.status) {
  case "done":
    read.state.result satisfies number;
    break;
  case "orphaned":
    read.state.assistant satisfies number;
    break;
  default:
    break;
}
type AllStatuses = TaskState<typeof toolKind>["status"];
const statuses: AllStatuses[] = ["planned", "running", "done", "aborted", "orphaned"];
void statuses;

declare const tx: ConversationTx;
declare const task: ReadTask<ToolStates, typeof toolKind.roles> & { state: Extract<ToolStates, { status: "planned" }> };
declare const callValue: Call;

// Valid writes.
tx.patch(task, "running", { call: callValue, assistant: 1, args: {}, replay: "safe" });
tx.settle(task, "done", { call: callValue, assistant: 1, output: "ok", result: 2 });
tx.task(toolKind, { state: { status: "planned", call: callValue, assistant: 1 } });

// @ts-expect-error a wrong status/payload pair: running needs args and replay
tx.patch(task, "running", { call: callValue, assistant: 1 });

// @ts-expect-error an extra key is rejected
tx.settle(task, "done", { call: callValue, assistant: 1, output: "ok", result: 2, extra: true });

const spread = { call: callValue, assistant: 1, output: "ok", result: 2, stray: 1 };
// @ts-expect-error extra keys are rejected from a variable too, not only from literals
tx.settle(task, "done", spread);

// @ts-expect-error a duplicated status in the payload is rejected
tx.settle(task, "done", { status: "done", call: callValue, assistant: 1, output: "ok", result: 2 });

// @ts-expect-error a terminal status cannot go through patch
tx.patch(task, "done", { call: callValue, assistant: 1, output: "ok", result: 2 });

// @ts-expect-error a live status cannot go through settle
tx.settle(task, "planned", { call: callValue, assistant: 1 });

// @ts-expect-error orphaned is never a public write target
tx.settle(task, "orphaned", { call: callValue, assistant: 1 });

// @ts-expect-error creation needs the complete initial tagged state
tx.task(toolKind, { state: { status: "planned", call: callValue } });

// Kind definition checks.
defineTaskKind<{ status: "a"; x: number } | { status: "b"; x: number }>()({
  kind: "bad-initial",
  roles: { a: "terminal", b: "start" },
  // @ts-expect-error the initial status must have role start
  initialStatus: "a",
  execute: noop,
  recover: noop,
  abort: noop,
});

defineTaskKind<{ status: "a"; x: number } | { status: "b"; x: number }>()({
  kind: "extra-role",
  // @ts-expect-error every role entry names a declared status, exactly
  roles: { a: "start", b: "terminal", c: "terminal" },
  initialStatus: "a",
  execute: noop,
  recover: noop,
  abort: noop,
});

// @ts-expect-error a user-declared orphaned status is rejected
defineTaskKind<{ status: "a"; x: number } | { status: "orphaned"; x: number }>()({
  kind: "declares-orphaned",
  roles: { a: "start", orphaned: "terminal" },
  initialStatus: "a",
  execute: noop,
  recover: noop,
  abort: noop,
});

// @ts-expect-error common fields must agree in type across variants
defineTaskKind<{ status: "a"; x: number } | { status: "b"; x: string }>()({
  kind: "inconsistent",
  roles: { a: "start", b: "terminal" },
  initialStatus: "a",
  execute: noop,
  recover: noop,
  abort: noop,
});

// @ts-expect-error common fields must agree in optionality across variants
defineTaskKind<{ status: "a"; x: number } | { status: "b"; x?: number }>()({
  kind: "optionality",
  roles: { a: "start", b: "terminal" },
  initialStatus: "a",
  execute: noop,
  recover: noop,
  abort: noop,
});
