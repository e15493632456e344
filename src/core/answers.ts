/**
 * Waits for an external answer: the second kind of declared wait, beside a sleep until a
 * durable time. A task parks until a route records an answer (a person's approval, a frontend's result
 * of a client tool, an MCP input), or until an optional deadline that the alarm wakes the object for.
 * While parked the task is not busy (no heartbeat), and a kill is no crash (the host counts no kill).
 *
 * The wait is durable session state keyed by task id, one wait per task at a time:
 *
 *   pico.wait/<task id> = { key, since, until?, answer? }
 *
 * - The task declares it (runtime.awaitAnswer writes it in the task's own commit when it is new).
 * - A route records the answer once (`recordAnswer`): one commit that checks the task is live and
 *   waiting for that key and not yet answered, then wakes the parked invocation after the commit.
 * - The task consumes it: the commit that records what the answer caused also ends the wait
 *   (`endWait(tx, taskId)`), so a kill before that commit finds the answer again after a restart, and
 *   one after it finds nothing to answer twice.
 */
import type { Id, JsonValue } from "../storage/records.js";
import type { Storage } from "../storage/storage.js";
import type { Call } from "./call.js";
import { PicoError } from "./errors.js";
import { bind, sessionValue, withKey, type ValueSpec } from "./state.js";

/** A declared wait and, once recorded, its answer. */
export interface WaitRecord {
  /** What the task waits for (a name of the kind's choosing: an approval id, a call id). */
  readonly key: string;
  /** When the wait was declared (the task's clock). */
  readonly since: number;
  /** The deadline: the task wakes with `deadline` at this time if no answer came. */
  readonly until?: number;
  readonly answer?: { readonly value: JsonValue; readonly at: number };
}

/** What a wait ended with. */
export type AnswerOutcome =
  | { readonly type: "answered"; readonly value: JsonValue; readonly at: number }
  | { readonly type: "deadline"; readonly until: number };

const WAIT_NAMESPACE = "pico.wait";
const waitSpec = sessionValue<WaitRecord>(WAIT_NAMESPACE);

/** The session value holding task `taskId`'s wait. */
export function waitValue(taskId: Id): ValueSpec<WaitRecord> {
  return withKey(waitSpec, String(taskId));
}

/** The parts of a transaction the helpers need. */
interface ValueWriter {
  value<T>(spec: ValueSpec<T>): { get(): Promise<T | undefined>; set(value: T): void; delete(): void };
}

/** End task `taskId`'s wait in the commit that records what its answer (or deadline) caused. */
export function endWait(tx: ValueWriter, taskId: Id): void {
  tx.value(waitValue(taskId)).delete();
}

/** Why an answer was refused: nothing waits for it, it was answered already, or its task is being aborted. */
export type RefusalReason = "not_waiting" | "answered" | "aborted";

/**
 * A refused answer (it wrote nothing). Codes: `not_found` when nothing waits for it, `conflict` when
 * the wait was answered already (`current` is that answer) or the task is marked for abort.
 */
export class AnswerRefused extends PicoError {
  override readonly name = "AnswerRefused";
  constructor(
    readonly reason: RefusalReason,
    message: string,
    readonly current?: { readonly value: JsonValue; readonly at: number },
  ) {
    super(reason === "not_waiting" ? "not_found" : "conflict", message);
  }
}

/** What `recordAnswer` needs of the harness (kept narrow so this module does not import it). */
export interface AnswerHost {
  readonly storage: Pick<Storage, "getTasks">;
  commit<T>(plan: (tx: ValueWriter) => T | Promise<T>, call: Call): Promise<T>;
  now(): number;
  /** Wake the parked invocation after the answer's commit. */
  answerArrived(taskId: Id): Promise<void>;
}

/**
 * Record the answer to task `taskId`'s wait for `key`, once. Refused (`AnswerRefused`) with
 * `not_waiting` when the task is not live or not waiting for `key`, `answered` when the wait was
 * already answered, and `aborted` when the task is marked for abort; a refused answer writes nothing.
 */
export async function recordAnswer(
  host: AnswerHost,
  taskId: Id,
  key: string,
  value: JsonValue,
  call: Call,
): Promise<{ readonly at: number }> {
  const at = await host.commit(async (tx) => {
    const task = (await host.storage.getTasks([taskId])).get(taskId);
    if (task === undefined || task.role === "terminal")
      throw new AnswerRefused("not_waiting", `task ${taskId} is not live: nothing waits for ${JSON.stringify(key)}`);
    const wait = tx.value(waitValue(taskId));
    const current = await wait.get();
    if (current === undefined || current.key !== key) {
      throw new AnswerRefused(
        "not_waiting",
        `task ${taskId} is not waiting for ${JSON.stringify(key)}${current === undefined ? "" : ` (it waits for ${JSON.stringify(current.key)})`}`,
      );
    }
    if (current.answer !== undefined)
      throw new AnswerRefused(
        "answered",
        `task ${taskId}'s wait for ${JSON.stringify(key)} was already answered`,
        current.answer,
      );
    if (task.abort === true)
      throw new AnswerRefused(
        "aborted",
        `task ${taskId} is being aborted: its wait for ${JSON.stringify(key)} takes no answer`,
      );
    const now = host.now();
    wait.set({ ...current, answer: { value, at: now } });
    return now;
  }, call);
  await host.answerArrived(taskId);
  return { at };
}

/** The wait as stored (outside a commit): for the task's own first check and for listings. */
export async function readWait(storage: Pick<Storage, "getValue">, taskId: Id): Promise<WaitRecord | undefined> {
  return (await storage.getValue(bind(waitValue(taskId), {})))?.value;
}
