/**
 * Spawning a child conversation (§4.3, §5.7, §9.1): one commit creates the child owned by the task of
 * the Call, records it in that task's `owns`, copies the selected current values of the source
 * conversation, applies overrides, appends the user prompt and creates the first generation (through
 * the installed turn API, which knows the generation kind). Also the ownership rule the commit line
 * checks on every batch: a conversation's `owner` and its owner task's `owns` are written together.
 * A child may start from its source's context (§8.5 `context: "inherit"`): it is then also a fork of
 * the source at a given entry (§2.4), which is provenance, not ownership (§2.5). The owner task's
 * conversation lists its children in the sticky list `pi.children`, so a snapshot names them with one
 * list read and no scan of historical tasks (§6.2).
 */
import type { Conversation, Id, JsonValue, MainWrite, Task } from "../storage/records.js";
import type { Storage } from "../storage/storage.js";
import type { UserInput } from "./entries.js";
import { invalid } from "./errors.js";
import { placeInput, queueInput, userDraft, type QueuedInput } from "./inbox.js";
import { bind, bindTo, conversationList, type ValueSpec } from "./state.js";
import type { TxBuilder } from "./tx-builder.js";

/** Which values a new child starts with (§4.3): copies of the source's current values, then overrides. */
export interface ChildValues {
  readonly inherit?: readonly ValueSpec<unknown>[];
  readonly set?: readonly (readonly [ValueSpec<unknown>, JsonValue])[];
}

/** spawn's options (§4.3, §8.5): the child's first user prompt and its initial values. */
export interface SpawnOptions {
  readonly prompt: UserInput;
  readonly values?: ChildValues;
  /** A request key for the prompt (§3.4): `acceptance(requestId)` finds the child and its inputId again. */
  readonly requestId?: string;
  /**
   * Start from the source's context through entry `at` (§8.5 `context: "inherit"`): the child is a
   * fork of the source at `at` (0: an empty prefix) as well as owned by the calling task.
   */
  readonly context?: { readonly at: Id };
}

/** The conversations created by tasks of a conversation, in creation order (sticky; §5.7). */
export const childrenList = conversationList<Id>("pi.children", { rewind: false });

/** What one spawn commit created: the child conversation, its prompt's inputId and its first generation. */
export interface Spawned {
  readonly conversationId: Id;
  readonly inputId: Id;
  readonly generation: Id;
}

/** The child's initial values as written in the creating commit (storage does not see them yet). */
export type InitialValues = <T>(spec: ValueSpec<T>) => T | undefined;

/** What the turn layer supplies for spawn: the first generation of a child, in the creating commit. */
export interface FirstTurn {
  firstGeneration(b: TxBuilder, conversationId: Id, inputs: readonly Id[], initial: InitialValues): Promise<Id>;
}

/**
 * Inside a builder whose call carries a task (the owner): create the child conversation of `from`'s
 * task as §4.3 describes, in this batch. `owner` is the live record of the committing task.
 */
export async function spawnChild(
  b: TxBuilder,
  from: Id,
  owner: Task,
  first: FirstTurn,
  now: number,
  options: SpawnOptions,
): Promise<Spawned> {
  if (owner.role === "terminal")
    throw invalid(`task ${owner.id} has settled; a settled task cannot own a new conversation (§5.7)`);
  const copies: [ValueSpec<unknown>, JsonValue][] = [];
  for (const spec of options.values?.inherit ?? []) {
    if (spec.scopeKind !== "conversation")
      throw invalid(`a child copies only conversation values; ${spec.namespace} is ${spec.scopeKind} state`);
    const value = await b.value(bind(spec, { conversationId: from })).get();
    if (value !== undefined) copies.push([spec, value as JsonValue]);
  }
  for (const [spec] of options.values?.set ?? []) {
    if (spec.scopeKind !== "conversation")
      throw invalid(`a child's initial values are conversation values; ${spec.namespace} is ${spec.scopeKind} state`);
  }
  const at = options.context?.at;
  if (at !== undefined && !(Number.isSafeInteger(at) && at >= 0))
    throw invalid(`a child's context position must be an entry id or 0, got ${String(at)}`);
  const child = b.createConversation({
    owner: owner.id,
    ...(at === undefined ? {} : { parent: { conversationId: from, at } }),
  });
  const written = new Map<string, JsonValue>();
  for (const [spec, value] of [...copies, ...(options.values?.set ?? [])]) {
    b.value(bind(spec, { conversationId: child })).set(value);
    written.set(specKey(spec), value);
  }
  // §5.7: the owner records the child in `owns` in the creation commit; state and status are unchanged,
  // so this is a same-status replacement that does not advance the status epoch (§6.1).
  b.push({ type: "patch", id: owner.id, role: owner.role, state: owner.state, owns: [...(owner.owns ?? []), child] });
  b.list(bindTo(childrenList, owner.conversationId)).append(child);
  const item: QueuedInput = {
    mode: "followUp",
    input: options.prompt,
    ...(options.requestId === undefined ? {} : { requestId: options.requestId }),
  };
  const inputId = queueInput(b, child, item);
  placeInput(b, child, inputId, item, userDraft(options.prompt, now));
  const generation = await first.firstGeneration(
    b,
    child,
    [inputId],
    <T>(spec: ValueSpec<T>) => written.get(specKey(spec)) as T | undefined,
  );
  return { conversationId: child, inputId, generation };
}

function specKey(spec: ValueSpec<unknown>): string {
  return JSON.stringify([spec.namespace, spec.key ?? null]);
}

/**
 * §5.7 on the line: a conversation created with an `owner` is in that task's `owns` in the same batch,
 * and a conversation a task newly lists in `owns` was created in that batch with that owner. Ownership
 * is immutable, so `owns` only grows. Throws `invalid_commit`; the batch writes nothing.
 */
export async function validateOwnerAgreement(writes: readonly MainWrite[], storage: Storage): Promise<void> {
  const created = new Map<Id, Conversation>();
  const owns = new Map<Id, { readonly before: readonly Id[]; after: readonly Id[] }>();
  for (const write of writes) {
    if (write.type === "createConversation") created.set(write.conversation.id, write.conversation);
    else if (write.type === "task") owns.set(write.task.id, { before: [], after: write.task.owns ?? [] });
    else if (write.type === "patch" && write.owns !== undefined) {
      const known = owns.get(write.id);
      if (known !== undefined) known.after = write.owns;
      else {
        const task = (await storage.getTasks([write.id])).get(write.id);
        owns.set(write.id, { before: task?.owns ?? [], after: write.owns });
      }
    }
  }
  for (const [taskId, { before, after }] of owns) {
    for (const id of before) {
      if (!after.includes(id))
        throw invalid(`task ${taskId} cannot drop conversation ${id} from owns: ownership is immutable (§5.7)`);
    }
    for (const id of after) {
      if (before.includes(id)) continue;
      const conversation = created.get(id);
      if (conversation?.owner !== taskId) {
        throw invalid(
          `task ${taskId} lists conversation ${id} in owns, but that conversation is not created with owner ${taskId} in this commit (§5.7)`,
        );
      }
    }
  }
  for (const conversation of created.values()) {
    if (conversation.owner === undefined) continue;
    if (!(owns.get(conversation.owner)?.after.includes(conversation.id) ?? false)) {
      throw invalid(
        `conversation ${conversation.id} names owner ${conversation.owner}, but that task does not record it in owns in the same commit (§5.7)`,
      );
    }
  }
}
