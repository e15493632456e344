/**
 * The driver's indexes follow durable state (§6.1, §6.4). At open, `seed` loads the live tasks and the
 * ancestry they need and starts nothing; a live foreground task of an unregistered kind is settled
 * `orphaned` in one internal commit (a background one is parked until its kind comes back). After every
 * durable batch, on the line, `applied` applies each write to the indexes (new live tasks, status
 * epochs, abort marks, settlements, new conversations' links) and reconsiders what it touched.
 */
import type { Conversation, Id, MainWrite, Task } from "../storage/records.js";
import type { Call } from "./call.js";
import { TaskCancelled } from "./errors.js";
import type { CommittedBatch } from "./session-types.js";
import type { Action, Invocation } from "./driver-types.js";
import type { DriverState } from "./driver-state.js";
import { reconsider } from "./driver-dispatch.js";

/** Open (§6.4): seed the live map and the ancestry it needs; start nothing. */
export async function seed(s: DriverState, call: Call): Promise<void> {
  const storage = s.session.storage;
  const live: Task[] = [];
  let after: Id | undefined;
  for (;;) {
    const page = await storage.scanTasks({ live: true, limit: 1000, ...(after === undefined ? {} : { after }) });
    live.push(...page.items);
    if (page.next === undefined) break;
    after = page.next;
  }
  const orphans: Task[] = [];
  for (const task of live) {
    if (s.session.taskKinds.has(task.kind)) continue;
    if (task.background) s.parked.add(task.id);
    else orphans.push(task);
  }
  for (const task of live) {
    if (orphans.includes(task)) continue;
    s.addLive(task);
  }
  for (const task of s.live.values()) {
    for (const dep of task.task.after) if (s.live.has(dep)) s.edge(dep, task.task.id);
  }
  await s.loadLinks([...new Set(live.map((t) => t.conversationId))]);
  if (orphans.length > 0) {
    // The only case in which the harness settles a task it does not own (§5.1).
    await s.session.commitInternal((b) => {
      for (const task of orphans) {
        const write: MainWrite = {
          type: "settle",
          id: task.id,
          role: "terminal",
          state: { ...task.state, status: "orphaned" },
        };
        s.internal.add(write);
        b.push(write);
      }
    }, call);
    for (const task of orphans)
      s.orphaned.push({ ...task, role: "terminal", state: { ...task.state, status: "orphaned" } });
  }
}

/** After persistence, on the line: apply every write to the indexes, then reserve work (§6.1). */
export async function applied(s: DriverState, commit: CommittedBatch): Promise<Action> {
  if (commit.batch.kind !== "main") return () => undefined;
  const touched = new Set<Id>();
  const signals: Invocation[] = [];
  const newConversations: Conversation[] = [];
  const taskConversations = new Set<Id>();
  for (const write of commit.batch.writes) {
    switch (write.type) {
      case "task": {
        if (write.task.role === "terminal") break;
        s.addLive(write.task);
        for (const dep of write.task.after) if (s.live.has(dep)) s.edge(dep, write.task.id);
        touched.add(write.task.id);
        taskConversations.add(write.task.conversationId);
        break;
      }
      case "patch": {
        const lt = s.live.get(write.id);
        if (lt === undefined) break;
        const marked = lt.task.abort === true || write.abort === true;
        if (write.state.status !== lt.task.state.status) lt.statusEpoch += 1;
        lt.task = {
          ...lt.task,
          role: write.role,
          state: write.state,
          ...(marked ? { abort: true as const } : {}),
          ...(write.owns === undefined ? {} : { owns: write.owns }),
        };
        if (write.abort === true) {
          const running = s.running.get(write.id);
          if (running !== undefined && running.method !== "abort") signals.push(running);
        }
        touched.add(write.id);
        break;
      }
      case "settle": {
        const lt = s.removeLive(write.id);
        if (lt === undefined) break;
        if (s.running.has(write.id)) s.settledStatus.set(write.id, write.state.status);
        for (const dependent of s.dependents.get(write.id) ?? []) touched.add(dependent);
        s.dependents.delete(write.id);
        touched.add(write.id);
        break;
      }
      case "createConversation":
        newConversations.push(write.conversation);
        break;
      default:
        break;
    }
  }
  for (const c of newConversations) {
    const ownerConversation =
      c.owner === undefined
        ? undefined
        : (s.live.get(c.owner)?.task.conversationId ?? (await s.ownerConversation(c.owner)));
    s.links.set(
      c.id,
      c.owner === undefined
        ? {}
        : ownerConversation === undefined
          ? { owner: c.owner }
          : { owner: c.owner, ownerConversation },
    );
  }
  await s.loadLinks([...taskConversations]);
  const actions = reconsider(s, touched);
  s.pruneLinks();
  return () => {
    for (const inv of signals) inv.controller.abort(new TaskCancelled(inv.taskId));
    actions();
  };
}
