/**
 * GUPP for conversation agents (seed 000 "GUPP Integration"; docs/rig.md): the host side that
 * keeps the Rig's GUPP commits coming. It observes commits (observing only: every decision is re-made
 * inside the Rig's own commit on the line) and schedules:
 *
 *   - activation of a pending hook once its conversation has no live turn (the hook is a durable
 *     assignment, so re-checking pending hooks when the session opens is not work by inference);
 *   - completion of an active hook whose input's result became `done` without the hook completing in
 *     that commit, in the next commit keyed by that input (a restart in between loses nothing: open
 *     re-checks active hooks whose input is answered). With the session's turn kit this is only a
 *     fallback: the kit's final-answer extension point lets `Rig.atFinalAnswer` complete the hook in the
 *     commit that records the `done` result, and place a pending hook's work item ahead of queued
 *     followUps there. A failed or aborted answer leaves the hook `active` for the witness and the mayor;
 *   - a throttled touch of `last_activity` for commits of the agent's conversation (never per token:
 *     previews are not commits, and the touch writes at most once per throttle window).
 */
import { INPUT_RESULT_NAMESPACE } from "../core/inbox.js";
import type { CommittedBatch } from "../core/harness.js";
import { bind } from "../core/state.js";
import type { Rig } from "./rig.js";
import { AGENT_NAMESPACE, HOOK_NAMESPACE, hookValue, scanAgents } from "./state.js";
import type { AgentRecord, StoredHook } from "./types.js";

export class Gupp {
  readonly #rig: Rig;
  readonly #report: (error: unknown) => void;
  /** conversation id -> agent id, and back, for conversation agents. */
  readonly #agents = new Map<number, string>();
  readonly #conversationOf = new Map<string, number>();
  /** Agents whose hook is pending. */
  readonly #pending = new Set<string>();
  /** Pending agents to try at the next kick: their hook became pending, or what kept them busy ended. */
  readonly #due = new Set<string>();
  /** task id -> the pending agents whose conversation that live task kept busy (tried again when it ends). */
  readonly #blockers = new Map<number, Set<string>>();
  /** Pending agents found busy with no live task to wait for: tried again at the next commit that ends a task. */
  readonly #retry = new Set<string>();
  /** inputId -> agent whose active hook waits for that input's answer, and agent -> that input. */
  readonly #awaiting = new Map<number, string>();
  readonly #awaitedBy = new Map<string, number>();
  readonly #lastTouch = new Map<string, number>();
  #running = false;
  #opened = false;

  constructor(rig: Rig, report: (error: unknown) => void = () => undefined) {
    this.#rig = rig;
    this.#report = report;
  }

  /**
   * On open (when the session is attached: at its open, or when an operator clears its fault): learn the
   * conversation agents (a keyed scan of the agent rows) and re-check their hooks; then follow commits.
   * A second call does nothing.
   */
  async open(): Promise<void> {
    if (this.#opened) return;
    this.#opened = true;
    const storage = this.#rig.harness.storage;
    for await (const agent of scanAgents(storage)) {
      if (agent.conversationId === undefined) continue;
      this.#agent(agent.agent_id, agent.conversationId);
      const stored = (await storage.getValue(bind(hookValue(agent.agent_id), {})))?.value;
      if (stored !== undefined) this.#learn(agent.agent_id, stored);
    }
    this.#rig.harness.onCommit((commit) => this.#observe(commit));
    for (const [inputId, agentId] of [...this.#awaiting]) void this.#complete(agentId, inputId);
    this.#kick();
  }

  #agent(agentId: string, conversationId: number): void {
    this.#agents.set(conversationId, agentId);
    this.#conversationOf.set(agentId, conversationId);
  }

  #forget(agentId: string): void {
    const conversationId = this.#conversationOf.get(agentId);
    if (conversationId !== undefined && this.#agents.get(conversationId) === agentId)
      this.#agents.delete(conversationId);
    this.#conversationOf.delete(agentId);
  }

  /** What a hook write means for GUPP: O(1) per write (no scan of the other agents). */
  #learn(agentId: string, stored: StoredHook): void {
    if (stored.file.status === "pending") {
      this.#pending.add(agentId);
      this.#due.add(agentId);
    } else {
      this.#pending.delete(agentId);
      this.#due.delete(agentId);
    }
    const awaited = this.#awaitedBy.get(agentId);
    if (awaited !== undefined) {
      this.#awaiting.delete(awaited);
      this.#awaitedBy.delete(agentId);
    }
    if (stored.file.status === "active" && stored.input !== undefined) {
      this.#awaiting.set(stored.input.inputId, agentId);
      this.#awaitedBy.set(agentId, stored.input.inputId);
    }
  }

  /** One commit: O(its writes). Only the agents it concerns are tried, never every pending hook. */
  #observe(commit: CommittedBatch): void {
    if (commit.batch.kind !== "main") return;
    const touched = new Set<string>();
    const answered: number[] = [];
    for (const write of commit.batch.writes) {
      if (write.type === "value.set" && write.addr.namespace === AGENT_NAMESPACE && write.addr.key !== undefined) {
        const agent = write.value as unknown as AgentRecord;
        if (agent.conversationId !== undefined) this.#agent(write.addr.key, agent.conversationId);
      } else if (
        write.type === "value.delete" &&
        write.addr.namespace === AGENT_NAMESPACE &&
        write.addr.key !== undefined
      ) {
        this.#forget(write.addr.key);
      } else if (
        write.type === "value.set" &&
        write.addr.namespace === HOOK_NAMESPACE &&
        write.addr.key !== undefined
      ) {
        this.#learn(write.addr.key, write.value as unknown as StoredHook);
      } else if (
        write.type === "value.set" &&
        write.addr.namespace === INPUT_RESULT_NAMESPACE &&
        write.addr.key !== undefined
      ) {
        if ((write.value as { status?: unknown }).status === "done") answered.push(Number(write.addr.key));
      } else if (write.type === "entry") {
        const agentId = this.#agents.get(write.entry.conversationId);
        if (agentId !== undefined) touched.add(agentId);
      } else if (write.type === "settle" || (write.type === "patch" && write.role === "terminal")) {
        for (const agentId of this.#retry) if (this.#pending.has(agentId)) this.#due.add(agentId);
        this.#retry.clear();
        // A task that kept a pending agent's conversation busy ended: try that agent again.
        const waiting = this.#blockers.get(write.id);
        if (waiting !== undefined) {
          this.#blockers.delete(write.id);
          for (const agentId of waiting) if (this.#pending.has(agentId)) this.#due.add(agentId);
        }
      }
    }
    // After the hook writes of the same commit are learned: a hook completed in the answer's own commit
    // no longer awaits, so only an answer that did not complete its hook needs a commit of its own.
    for (const inputId of answered) {
      const agentId = this.#awaiting.get(inputId);
      if (agentId !== undefined) void this.#complete(agentId, inputId);
    }
    const now = this.#rig.now();
    for (const agentId of touched) {
      // Skip what the in-commit throttle would refuse anyway (a default window of 30 s).
      if (now - (this.#lastTouch.get(agentId) ?? 0) < 1_000) continue;
      this.#lastTouch.set(agentId, now);
      this.#rig.guppTouch(agentId).catch(this.#report);
    }
    if (this.#due.size > 0) this.#kick();
  }

  async #complete(agentId: string, inputId: number): Promise<void> {
    try {
      if (await this.#rig.guppComplete(agentId)) {
        this.#awaiting.delete(inputId);
        if (this.#awaitedBy.get(agentId) === inputId) this.#awaitedBy.delete(agentId);
      }
    } catch (error) {
      this.#report(error);
    }
  }

  /**
   * Try the due pending hooks, one activation commit each. An agent whose conversation has a live turn
   * waits for that conversation's live tasks to end (their settle names them), not for every commit.
   */
  #kick(): void {
    if (this.#running) return;
    this.#running = true;
    void (async () => {
      try {
        while (this.#due.size > 0) {
          const due = [...this.#due];
          this.#due.clear();
          for (const agentId of due) {
            if (!this.#pending.has(agentId)) continue;
            const conversationId = this.#conversationOf.get(agentId);
            if (conversationId === undefined) continue;
            const driver = this.#rig.harness.driver;
            if (driver.liveTurnTasks(conversationId) === 0 && (await this.#rig.guppActivate(agentId))) continue;
            if (!this.#pending.has(agentId)) continue;
            // Still busy (or the commit found it busy): wait for its live tasks to end; with none to wait
            // for, try again at the next commit that ends a task.
            const tasks = driver.foregroundClosure(conversationId).tasks;
            if (tasks.length === 0) this.#retry.add(agentId);
            for (const taskId of tasks) {
              const waiting = this.#blockers.get(taskId) ?? new Set<string>();
              waiting.add(agentId);
              this.#blockers.set(taskId, waiting);
            }
          }
        }
      } catch (error) {
        this.#report(error);
      } finally {
        this.#running = false;
        if (this.#due.size > 0) this.#kick();
      }
    })();
  }
}
