/**
 * SessionObject: one pico v3 session per Durable Object. It hosts the Harness over the
 * object's SQLite storage, keeps the session attached so accepted work always runs, multiplexes every
 * reason to wake onto the one alarm, and keeps two durable safety valves: the session fault record and
 * per-task kill counters (quarantine). Its public methods are Durable Object RPC methods: tests call them
 * through the stub, and the HTTP app (src/worker/http/app.ts) calls `createSession`, `op` (the operations of
 * session/api.ts and the *-ops.ts modules, returned as Outcomes) and `destroy`. Its `fetch` serves the watch transports (SSE and
 * hibernatable WebSockets, watch/transport.ts). The harness opens with the turn kit (session/kinds.ts) over the
 * session's models (platform/models.ts: the offline echo model, plus real providers whose keys are set).
 *
 * A session exists only once `create` ran. The constructor writes nothing; every other operation on a
 * never-created object throws SessionNotFound and writes nothing (not even the schema).
 *
 * One concept over 400 lines: the session Durable Object's lifecycle (open, alarm, fault and quarantine
 * valves, the RPC entry points), which all share the one open session.
 */
import { DurableObject } from "cloudflare:workers";
import type { Models } from "@earendil-works/pi-ai";
import { Hono } from "hono";
import { BACKGROUND_CONTEXT } from "../../core/call.js";
import { CommitLine } from "../../core/line.js";
import type { InspectResult } from "../../core/driver.js";
import { Harness, type InitialValue } from "../../core/harness.js";
import type { Clock } from "../../core/host.js";
import type { Id, Task } from "../../storage/records.js";
import { storedVersion } from "../../storage/migrations.js";
import type { SqlHost } from "../../storage/sql.js";
import { SqliteStorage } from "../../storage/sqlite.js";
import { AlarmPlan, type AlarmStats } from "./alarm-plan.js";
import { directoryStub } from "../directory/object.js";
import { DirectoryLink } from "./directory-link.js";
import { ownerReaches, readOwner, recordOwner, type SessionWhere } from "../identity/owner.js";
import type { Env } from "../env.js";
import { SessionNotFound } from "../errors.js";
import type { SessionInspection } from "../../api/responses.js";
import { HostBook } from "./host-book.js";
import { deployedVersion, HEARTBEAT_MS, hostClock, hostReport, killBound } from "../platform/host-config.js";
import { setLogLevel } from "../log.js";
import { sessionTaskKinds, sessionTurnKit } from "./kinds.js";
import { sandboxEnvFor } from "../platform/sandbox-env.js";
import { FakeExecutionEnv } from "../../kinds/exec-fake.js";
import { buildModels, defaultModel } from "../platform/models.js";
import { retryOptions } from "../platform/retry-config.js";
import { Problem, problemData, toProblem, type Outcome } from "../problems.js";
import type { SessionConfigBody } from "../schemas.js";
import { SessionApi, type SessionConfig } from "./api.js";
import { canonical, checkConfig, createValues, normalizeConfig } from "./config.js";
import { inputIndex, inputOps } from "./input-ops.js";
import { scheduleOps } from "./schedule-ops.js";
import { SessionHost } from "./host.js";
import { openTelemetryTracer } from "../platform/telemetry.js";
import type { CreateConfig, RigSessionOps, SessionOps } from "./ops.js";
import { FeedBook, readAttachment, sendableCloseCode, socketSubscriber, sseResponse, type AnyFeed, type Watcher, type WatchTarget } from "../watch/transport.js";
import { objectWatchGuard, watcherFromHeaders, type WatchGuard } from "../watch/guard.js";
import { TEMPLATE_KEY, type TemplateBinding } from "../directory/templates.js";
import type { FeedSubscriber } from "../watch/feed.js";
import { generationConfig } from "../../kinds/config.js";
import type { TurnKit } from "../../kinds/turns.js";
import { erase } from "../../core/task-kind.js";
import { createWitnessKind, Gupp, Rig } from "../../rig/index.js";
import { acceptInput } from "../../kinds/placement.js";
import { RigOps } from "./rig-ops.js";
import { inboundOps } from "./inbound-ops.js";
import { remoteCallServices } from "../remote/http-transport.js";
import { remoteCallOps } from "../remote/call-ops.js";
import { pendingOps } from "./pending-ops.js";
import { objectOutbox, outboxOps, type Outbox } from "../outbox/outbox.js";
import { selectableTools, sessionCatalog, type CatalogCache } from "./tool-catalog.js";
import { limitsMeter } from "../limits/meter.js";

/** The rig's operations as entries of the SessionObject's op table. */
function bindRig(table: ReturnType<typeof RigOps.table>): { readonly [K in keyof RigSessionOps]: (session: OpenSession, ...args: RigSessionOps[K]["args"]) => Promise<RigSessionOps[K]["result"]> } {
  const out: Record<string, (session: OpenSession, ...args: never[]) => Promise<unknown>> = {};
  for (const [name, run] of Object.entries(table) as [string, (ops: RigOps, ...args: never[]) => Promise<unknown>][]) {
    out[name] = (session, ...args) => run(session.rig, ...args);
  }
  return out as unknown as { readonly [K in keyof RigSessionOps]: (session: OpenSession, ...args: RigSessionOps[K]["args"]) => Promise<RigSessionOps[K]["result"]> };
}

/** The harness this instance opened, with its host bookkeeping. */
interface OpenSession {
  readonly harness: Harness;
  readonly book: HostBook;
  readonly kit: TurnKit;
  readonly api: SessionApi;
  readonly feeds: FeedBook;
  /** The rig layer (docs/rig.md): agents, hooks, mail, nudges, the witness. */
  readonly rig: RigOps;
  /** GUPP's host side: opened with the attach (at open, or when an operator clears the fault). */
  readonly gupp: Gupp;
  /** Faulted, shut down or closed: the next operation reopens (reopen starts nothing, §6.4). */
  stale: boolean;
}

/**
 * Whether the session was created: its schema exists and the creating commit (root conversation and
 * initial values, one atomic batch) is durable, so a conversation row exists (conversations are only
 * ever tombstoned, never removed). Reads only, so asking writes nothing.
 */
export function sessionCreated(host: SqlHost): boolean {
  if (storedVersion(host) === 0) return false;
  return host.sql.exec("SELECT 1 AS found FROM conversations LIMIT 1").toArray().length > 0;
}

export class SessionObject extends DurableObject<Env> {
  readonly #clock: Clock;
  readonly #version: string;
  readonly #alarms: AlarmPlan;
  /**
   * Opening, creating and reopening run one at a time (two creates must not both write a root). A FIFO
   * of its own, not the harness's line: the harness does not exist yet while it is being opened.
   */
  readonly #lifecycle = new CommitLine();
  #session: OpenSession | undefined;
  #models: Promise<Models> | undefined;
  /** Sockets registered with a feed of the open harness (after hibernation this starts empty). */
  readonly #sockets = new Map<WebSocket, { feed: AnyFeed; subscriber: FeedSubscriber<unknown, unknown> }>();
  readonly #watchApp = this.#buildWatchApp();
  /** This session's row in its tenant's directory (GET /v1/sessions): sent on create, relabel, activity, delete. */
  readonly #directory: DirectoryLink;
  /** Events out: capture in the commit, delivery on the alarm (outbox/outbox.ts). */
  readonly #outbox: Outbox;
  /** The tenant's tool catalog as this instance knows it (memory only; session/tool-catalog.ts). */
  readonly #catalog: CatalogCache;
  /** The tenant a session is being created for (before its directory link knows it). */
  #creatingFor: string | undefined;
  /** Users' watches: closed at their token's expiry or on revocation (watch/guard.ts). */
  readonly #guard: WatchGuard;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    // Nothing is written here: a session exists only once `create` ran.
    setLogLevel(env.LOG_LEVEL);
    this.#clock = hostClock();
    this.#version = deployedVersion(env);
    // Hibernated sockets answer pings without waking the object.
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair("ping", "pong"));
    this.#alarms = new AlarmPlan(
      {
        set: (at) => this.#alarmWrite(ctx.storage.setAlarm(at)),
        clear: () => this.#alarmWrite(ctx.storage.deleteAlarm()),
      },
      HEARTBEAT_MS,
    );
    this.#directory = new DirectoryLink({
      kv: ctx.storage.kv,
      clock: this.#clock,
      send: (tenant, update) => directoryStub(env, tenant).apply(update),
      liveTasks: async () => {
        const session = this.#session;
        if (session === undefined || session.stale) return 0;
        return (await session.harness.storage.scanTasks({ live: true, limit: 1000 })).items.length;
      },
      due: (at) => this.#alarms.directory(at, this.#clock.now()),
      report: (error) => hostReport({ type: "directory_update_failed", error }),
    });
    this.#outbox = objectOutbox(ctx, env, this.#clock, () => this.#directory.where, (at) => this.#alarms.outbox(at, this.#clock.now()));
    this.#catalog = sessionCatalog(env, this.#clock, () => this.#directory.where?.tenant ?? this.#creatingFor);
    this.#guard = objectWatchGuard(ctx, env, this.#clock, (at) => this.#alarms.watches(at, this.#clock.now()), (ws) => this.#dropSocket(ws));
  }

  // RPC ---------------------------------------------------------------------------------------------

  /**
   * Create the session: migrate the schema and open the harness, committing the root conversation with
   * `rootValues`, then attach it. A second create on an existing session changes nothing.
   */
  create(config: CreateConfig = {}): Promise<{ readonly created: boolean }> {
    return this.#lifecycle.run(async () => {
      if (sessionCreated(this.ctx.storage)) return { created: false };
      await this.#open(config.rootValues ?? []);
      return { created: true };
    });
  }

  exists(): boolean {
    return sessionCreated(this.ctx.storage);
  }

  async inspect(): Promise<SessionInspection> {
    const session = await this.#acquire();
    const result = await session.harness.inspect(BACKGROUND_CONTEXT);
    // The driver knows the tasks it withheld in this instance; the book also knows those whose count
    // reached the bound under this version but were not tried yet since the object started.
    const counted = new Set(session.book.quarantined(this.#version));
    for (const task of result.quarantined) counted.add(task.id);
    const quarantined = [...result.start, ...result.inflight].filter((task: Task) => counted.has(task.id));
    return {
      ...result,
      quarantined,
      fault: session.book.fault(),
      kills: session.book.kills(),
      killBound: session.book.bound,
      version: this.#version,
      busy: session.harness.driver.busy,
      nextWake: session.harness.driver.nextWake,
    };
  }

  /** Mark a live task for abort (§6.3); its abort handler runs even when it is quarantined. */
  async abortTask(taskId: Id): Promise<void> {
    const session = await this.#acquire();
    await session.harness.abortTask(taskId, BACKGROUND_CONTEXT);
  }

  /** Shut the session down (§6.4): mark every live task, run their abort handlers, close. */
  async shutdown(): Promise<void> {
    const session = await this.#acquire();
    try {
      await session.harness.shutdown(BACKGROUND_CONTEXT);
    } finally {
      session.stale = true;
    }
  }

  /** Clear the session fault so that alarms drive it again; returns whether there was one. */
  clearFault(): Promise<{ readonly cleared: boolean }> {
    return this.#lifecycle.run(async () => {
      const session = await this.#acquireNow();
      const cleared = session.book.clearFault();
      if (cleared) {
        await session.harness.attach(BACKGROUND_CONTEXT);
        // The session was opened faulted, so GUPP was not: pending and answered hooks are re-checked now.
        await session.gupp.open();
      }
      return { cleared };
    });
  }

  /** Give a quarantined task a fresh kill count: execute/recover start again. */
  async releaseQuarantine(taskId: Id): Promise<void> {
    const session = await this.#acquire();
    session.book.release(taskId);
    await session.harness.driver.release(taskId);
  }

  // HTTP API (src/worker/http/app.ts) ---------------------------------------------------------------------

  /**
   * PUT /v1/sessions/{session}: create with this config (defaults filled in), or compare with the config
   * the session was created with: the same answers `created: false`, a different one is a conflict.
   * Nothing is written unless the session is created now. With `where` (the HTTP layer's tenant and
   * name), a created session is announced to its tenant's directory with the body's title and labels.
   */
  createSession(body: SessionConfigBody, where?: SessionWhere, template?: TemplateBinding): Promise<Outcome<{ readonly created: boolean; readonly config: SessionConfig }>> {
    return this.#outcome(() =>
      this.#lifecycle.run(async () => {
        const config = normalizeConfig(body, defaultModel(this.env));
        if (sessionCreated(this.ctx.storage)) {
          // Another user's session answers as an unknown one does, and nothing changes (identity/user-access.ts).
          if (where?.owner !== undefined && where.granted !== true && readOwner(this.ctx.storage.kv) !== where.owner) throw new SessionNotFound();
          const session = await this.#acquireNow();
          const stored = (await session.api.summary()).config;
          if (stored !== undefined && canonical(stored) !== canonical(config)) {
            throw new Problem("session_config_conflict", `the session exists with config ${canonical(stored)}; this request asks for ${canonical(config)}`);
          }
          return { created: false, config: stored ?? config };
        }
        const models = await this.#modelsOf();
        const kit = sessionTurnKit(models, { turn: retryOptions(this.env) });
        this.#creatingFor = where?.tenant;
        recordOwner(this.ctx.storage.kv, where?.owner);
        checkConfig(models, await selectableTools(kit.tools.names(), this.#catalog, config.selectedTools), config);
        await this.#open(createValues(config));
        if (template !== undefined) this.ctx.storage.kv.put(TEMPLATE_KEY, template);
        if (where !== undefined) {
          await this.#directory.created({ tenant: where.tenant, session: where.session, owner: where.owner, ...(body.title === undefined ? {} : { title: body.title }), ...(body.labels === undefined ? {} : { labels: body.labels }) });
        }
        return { created: true, config };
      }),
    );
  }

  /** One API operation (see SessionOps); a never-created session is `session_not_found` and writes nothing. */
  op<K extends keyof SessionOps>(name: K, ...args: SessionOps[K]["args"]): Promise<Outcome<SessionOps[K]["result"]>> {
    return this.#outcome(async () => {
      const session = await this.#acquire();
      const handler = this.#ops[name] as (session: OpenSession, ...args: SessionOps[K]["args"]) => Promise<SessionOps[K]["result"]>;
      return handler(session, ...args);
    });
  }

  /** PATCH /v1/sessions/{session}: change the directory title and/or labels (`null` title clears it). */
  relabel(change: { readonly title?: string | null; readonly labels?: readonly string[] }): Promise<Outcome<{ readonly title?: string; readonly labels: readonly string[] }>> {
    return this.#outcome(async () => {
      await this.#acquire();
      if (this.#directory.meta() === undefined) throw new Problem("conflict", "this session has no directory entry (it was not created over HTTP)");
      await this.#directory.relabel(change);
      return this.#directory.meta() ?? { labels: [] };
    });
  }

  /** Whether end user `sub` reaches this session (it owns it, or `creating` and nobody created it): identity/user-access.ts. */
  reaches(sub: string, creating: boolean): boolean {
    return ownerReaches(this.ctx.storage.kv, sessionCreated(this.ctx.storage), sub, creating);
  }

  /** The directory title and labels (undefined: not created over HTTP). */
  directoryMeta(): { readonly title?: string; readonly labels: readonly string[] } | undefined {
    return this.#directory.meta();
  }

  /** The template this session was created from (what its users may set), and whether it exists. */
  templateBinding(): { readonly exists: boolean; readonly binding?: TemplateBinding } {
    const binding = sessionCreated(this.ctx.storage) ? this.ctx.storage.kv.get<TemplateBinding>(TEMPLATE_KEY) : undefined;
    return { exists: sessionCreated(this.ctx.storage), ...(binding === undefined ? {} : { binding }) };
  }

  /** A revocation from the tenant's directory: close `sub`'s watches issued before `before` (Unix seconds). */
  closeWatches(sub: string, before: number): { readonly closed: number } {
    return sessionCreated(this.ctx.storage) ? this.#guard.revoke(sub, before) : { closed: 0 };
  }

  /** DELETE /v1/sessions/{session}: close the harness, end watchers, delete every row and the alarm. */
  destroy(): Promise<Outcome<{ readonly deleted: true }>> {
    return this.#outcome(() =>
      this.#lifecycle.run(async () => {
        if (!sessionCreated(this.ctx.storage)) throw new SessionNotFound();
        // Every watcher gets its close frame before DELETE answers (and before its feed would end it as
        // "the session closed"). The object is not reset to drop the connections sooner (ctx.abort is
        // logged as an uncaught exception): workerd keeps the TCP connection of a socket whose close the
        // server started until the instance goes idle, about 10 s, though the close handshake is done.
        for (const ws of this.ctx.getWebSockets()) {
          try {
            ws.close(1000, "the session was deleted");
          } catch {
            // already closed
          }
        }
        const current = this.#session;
        this.#session = undefined;
        if (current !== undefined) {
          current.feeds.close();
          await current.harness.close(BACKGROUND_CONTEXT).catch((error: unknown) => hostReport({ type: "harness", report: error }));
        }
        this.#sockets.clear();
        this.#outbox.closed();
        const row = this.#directory.snapshot();
        await this.ctx.storage.deleteAlarm();
        await this.ctx.storage.deleteAll();
        this.#alarms.cleared(this.#clock.now());
        // The tombstone stays in KV (and on the alarm) until the directory acknowledges it.
        await this.#directory.deleted(row);
        return { deleted: true as const };
      }),
    );
  }

  /** Watch transports: SSE and WebSocket upgrades forwarded by the Worker after auth (watch routes). */
  override async fetch(request: Request): Promise<Response> {
    return this.#watchApp.fetch(request);
  }

  override async webSocketClose(ws: WebSocket, code: number, reason: string): Promise<void> {
    // The client started the close: complete the handshake. Until the server's side is closed too the
    // runtime keeps the socket, and its connection stays open until the instance goes idle.
    if (ws.readyState !== WebSocket.CLOSED) {
      try {
        ws.close(sendableCloseCode(code), reason);
      } catch {
        // already closed
      }
    }
    this.#dropSocket(ws);
  }

  override async webSocketError(ws: WebSocket): Promise<void> {
    this.#dropSocket(ws);
  }

  override async webSocketMessage(ws: WebSocket, message: string | ArrayBuffer): Promise<void> {
    // Watch sockets are one-way; anything but the auto-answered "ping" is ignored.
    void ws;
    void message;
  }

  readonly #ops: { readonly [K in keyof SessionOps]: (session: OpenSession, ...args: SessionOps[K]["args"]) => Promise<SessionOps[K]["result"]> } = {
    summary: (s) => s.api.summary(),
    ...inputOps<OpenSession>(),
    snapshot: (s, ref) => s.api.snapshot(ref),
    entries: (s, ref, query) => s.api.entries(ref, query),
    abort: async (s, ref) => {
      await s.api.abort(ref);
      return { aborted: true as const };
    },
    deleteConversation: (s, ref) => s.api.deleteConversation(ref),
    fork: (s, ref, options) => s.api.fork(ref, options),
    continue: (s, ref) => s.api.continue(ref),
    collapse: (s, ref, instructions) => s.api.collapse(ref, instructions),
    reset: async (s, ref, handoff) => {
      await s.api.reset(ref, handoff);
      return { reset: true as const };
    },
    getConfig: (s, ref) => s.api.getConfig(ref),
    patchConfig: (s, ref, patch) => s.api.patchConfig(ref, patch),
    tasks: (s, query) => s.api.tasks(query),
    abortTask: (s, id) => s.api.abortTask(id),
    usage: (s, query) => s.api.usage(query),
    ...scheduleOps<OpenSession>(),
    inspect: () => this.inspect(),
    shutdown: async () => {
      await this.shutdown();
      return { shutdown: true as const };
    },
    clearFault: () => this.clearFault(),
    releaseQuarantine: async (s, id) => {
      await s.api.task(id);
      await this.releaseQuarantine(id);
      return { released: true as const };
    },
    lastSeq: async (s) => s.harness.storage.lastSeq,
    ...bindRig(RigOps.table()),
    ...inboundOps<OpenSession>(),
    ...remoteCallOps<OpenSession>(),
    ...pendingOps<OpenSession>(),
    ...outboxOps<OpenSession>(() => this.#outbox),
  };

  ping(): number {
    return this.ctx.storage.sql.exec("select 1 as one").one()["one"] as number;
  }

  // Alarm ---------------------------------------------------------------------------------------------

  /**
   * One alarm for every reason to wake (session/alarm-plan.ts). Idempotent (delivery is at-least-once): open the
   * harness if this instance has not (open starts nothing), and unless the session is faulted attach it
   * so runnable work dispatches — inflight tasks recover, sleeping ones execute and sleep the remainder
   * — then re-arm. It never awaits that work and never throws: a throw makes the runtime retry the alarm,
   * which would loop on the same failure.
   */
  override async alarm(): Promise<void> {
    try {
      // The runtime consumed the alarm that fired; a heartbeat moves on while work is in flight.
      this.#alarms.fired(this.#clock.now());
      this.#guard.sweep();
      if (sessionCreated(this.ctx.storage)) {
        // Opening attaches unless the durable fault record says not to auto-drive the session.
        await this.#acquire();
      }
      // A directory update not yet acknowledged (also a deleted session's tombstone) is retried.
      await this.#directory.alarm();
      await this.#outbox.alarm();
    } catch (error) {
      hostReport({ type: "alarm_failed", error });
    }
  }

  // Test access (through runInDurableObject, never RPC) ------------------------------------------------

  /** The open harness of this instance, if any (tests reach it with runInDurableObject). */
  get harness(): Harness | undefined {
    return this.#session?.harness;
  }

  /** Alarm writes and earliest-wake changes of this instance. */
  get alarmStats(): AlarmStats {
    return this.#alarms.stats;
  }

  get clock(): Clock {
    return this.#clock;
  }

  // Opening -------------------------------------------------------------------------------------------

  #acquire(): Promise<OpenSession> {
    const current = this.#session;
    if (current !== undefined && !current.stale) return Promise.resolve(current);
    return this.#lifecycle.run(() => this.#acquireNow());
  }

  /** On the lifecycle queue: the open session, reopening a stale one; not found if never created. */
  async #acquireNow(): Promise<OpenSession> {
    const current = this.#session;
    if (current !== undefined && !current.stale) return current;
    if (current !== undefined) {
      this.#session = undefined;
      current.feeds.close();
      this.#sockets.clear();
      // Join the old harness's calls before a new one takes the same storage (close is shared and safe
      // after a fault or shutdown).
      await current.harness.close(BACKGROUND_CONTEXT).catch((error: unknown) => hostReport({ type: "harness", report: error }));
    }
    if (!sessionCreated(this.ctx.storage)) throw new SessionNotFound();
    return this.#open(undefined);
  }

  /**
   * Open storage (running any newer migrations), the host and the harness; attach unless faulted.
   * `rootValues` is given only by create (empty storage gets its root then).
   */
  async #open(rootValues: readonly InitialValue[] | undefined): Promise<OpenSession> {
    // A misconfigured retry policy refuses the open before anything touches storage.
    const retry = retryOptions(this.env);
    const armed = await this.ctx.storage.getAlarm();
    const storage = SqliteStorage.open(this.ctx.storage);
    const book = new HostBook(this.ctx.storage, killBound());
    const host = new SessionHost({
      book,
      alarms: this.#alarms,
      clock: this.#clock,
      version: this.#version,
      telemetry: { tracer: openTelemetryTracer(), session: this.ctx.id.toString() },
      report: hostReport,
      where: () => this.#directory.where,
      onFault: () => {
        if (this.#session?.harness === harness) this.#session.stale = true;
      },
    });
    const models = await this.#modelsOf();
    // Jobs run in the session's sandbox when the SANDBOX binding is configured, else on the scripted fake.
    const env = sandboxEnvFor(this.env, this.ctx.id.toString()) ?? new FakeExecutionEnv({ clock: this.#clock });
    // The witness kind and the turn kit's final-answer extension are registered at open; the Rig they
    // serve is built over the opened harness.
    let rig: Rig | undefined;
    // GUPP at a conversation agent's final answer, in the commit that records it: completes the hook
    // its work item answered, or accepts a pending hook's work item ahead of queued followUps (indexed
    // like an input accepted over HTTP, so GET /inputs/{id} finds it).
    const kit = sessionTurnKit(models, {
      env,
      turn: retry,
      remote: remoteCallServices(this.env, this.#clock, () => this.#directory.where),
      catalog: this.#catalog,
      finalAnswer: async (boundary) => {
        await rig?.atFinalAnswer({
          ...boundary,
          acceptFirst: async (input, requestId) => {
            const inputId = await boundary.acceptFirst(input, requestId);
            boundary.builder.value(inputIndex(inputId)).set({ conversationId: boundary.conversationId });
            return inputId;
          },
        });
      },
    });
    const witness = createWitnessKind(
      () => rig,
      (error) => hostReport({ type: "harness", report: error }),
    );
    const harness: Harness = await Harness.open(
      storage,
      {
        taskKinds: sessionTaskKinds([...kit.kinds, erase(witness)]),
        host,
        report: (report) => hostReport({ type: "harness", report }),
        // The same env the job kind runs on: tasks and tools reach it as runtime.env (§5.2, §9.3).
        env,
        observeBatch: this.#outbox.observer(),
        ...(rootValues === undefined ? {} : { rootValues }),
      },
      BACKGROUND_CONTEXT,
    );
    kit.install(harness);
    // Registered first, so the guard alarm is written in the same turn as a commit that created work.
    // The driver's wake already counts work this commit dispatched asleep (a schedule waiting for its
    // due time): that is the reason to wake, and no guard is needed for it.
    harness.onCommit(() => this.#alarms.live(harness.driver.hasLiveToWake, this.#clock.now(), harness.driver.nextWake));
    harness.onCommit(() => this.#directory.activity());
    harness.onCommit((commit) => this.#outbox.committed(commit));
    harness.onCommit(limitsMeter(this.env, () => this.#directory.where));
    const feeds = new FeedBook(harness);
    rig = new Rig(harness, {
      witness,
      conversationValues: Object.values(generationConfig),
      // GUPP: the work item is accepted as the conversation agent's input, as if its user hit enter.
      accept: async (tx, conversationId, input, requestId) => {
        const receipt = await acceptInput(tx.builder, conversationId, { input, requestId }, kit.options, harness.now());
        tx.value(inputIndex(receipt.inputId)).set({ conversationId });
        return receipt.inputId;
      },
    });
    const gupp = new Gupp(rig, (error) => hostReport({ type: "harness", report: error }));
    const session: OpenSession = { harness, book, kit, api: new SessionApi(harness, kit, models, this.#catalog), feeds, rig: new RigOps(rig, feeds), gupp, stale: false };
    this.#session = session;
    // Watchers that survived hibernation (or a reopen) are registered before any new commit.
    await this.#rewatchSockets(session);
    // Keep the session attached whenever it is open and not faulted, so accepted work always runs; a
    // faulted session waits for an operator (inspect, abort, clearFault).
    try {
      if (book.fault() === undefined) {
        await harness.attach(BACKGROUND_CONTEXT);
        // Pending and answered GUPP hooks are durable assignments: re-checked on every open.
        await gupp.open();
      }
    } finally {
      // Learn the scheduled alarm after attaching, so the work attach dispatched is counted in the
      // first write instead of causing a clear and a set.
      this.#alarms.directory(this.#directory.dueAt, this.#clock.now());
      this.#outbox.opened(harness);
      this.#alarms.known(armed ?? undefined, this.#clock.now());
    }
    return session;
  }

  async #modelsOf(): Promise<Models> {
    this.#models ??= buildModels(this.env);
    try {
      return await this.#models;
    } catch (error) {
      this.#models = undefined; // a misconfiguration is reported on every use, not cached
      throw error;
    }
  }

  /** Run an API operation and return its value or its problem (RPC would lose an error's class). */
  async #outcome<T>(run: () => Promise<T>): Promise<Outcome<T>> {
    try {
      return { ok: true, value: await run() };
    } catch (error) {
      return { ok: false, problem: problemData(toProblem(error, (report) => hostReport({ type: "harness", report }))) };
    }
  }

  /** Register every accepted socket that no feed of this harness serves yet (after hibernation). */
  async #rewatchSockets(session: OpenSession): Promise<void> {
    for (const ws of this.ctx.getWebSockets()) {
      if (this.#sockets.has(ws)) continue;
      const attachment = readAttachment(ws);
      if (attachment === undefined) {
        ws.close(1011, "unknown watch");
        continue;
      }
      try {
        await this.#watchSocket(session, ws, attachment.target, attachment.lastEventId, attachment.watcher);
      } catch {
        ws.close(1000, "the watched conversation is gone");
      }
    }
  }

  async #feedOf(session: OpenSession, target: WatchTarget): Promise<AnyFeed> {
    if (target.type === "conversation") await session.api.conversation(target.id);
    return session.feeds.target(target);
  }

  async #watchSocket(session: OpenSession, ws: WebSocket, target: WatchTarget, lastEventId: string | undefined, watcher?: Watcher): Promise<void> {
    const feed = await this.#feedOf(session, target);
    const subscriber = socketSubscriber(ws, target, watcher);
    this.#sockets.set(ws, { feed, subscriber });
    ws.serializeAttachment({ target, lastEventId, ...(watcher === undefined ? {} : { watcher }) });
    (feed as AnyFeed & { subscribe(s: FeedSubscriber<unknown, unknown>, id: string | undefined): void }).subscribe(subscriber, lastEventId);
  }

  #dropSocket(ws: WebSocket): void {
    const registered = this.#sockets.get(ws);
    if (registered === undefined) return;
    this.#sockets.delete(ws);
    (registered.feed as AnyFeed & { unsubscribe(s: FeedSubscriber<unknown, unknown>): void }).unsubscribe(registered.subscriber);
  }

  /** The object's internal watch routes (the Worker authenticated and validated the request). */
  #buildWatchApp(): Hono {
    const app = new Hono();
    app.get("/watch/:target", async (c) => {
      const raw = c.req.param("target");
      const lastEventId = c.req.header("last-event-id") ?? undefined;
      const watcher = watcherFromHeaders(c.req.raw.headers);
      const refused = this.#guard.refusal(watcher);
      if (refused !== undefined) return refused.response();
      let session: OpenSession;
      let feed: AnyFeed;
      let target: WatchTarget;
      try {
        session = await this.#acquire();
        target = raw === "session" ? { type: "session" } : { type: "conversation", id: raw === "root" ? session.harness.rootId : Number(raw) };
        feed = await this.#feedOf(session, target);
      } catch (error) {
        return toProblem(error, (report) => hostReport({ type: "harness", report })).response();
      }
      if (c.req.header("upgrade")?.toLowerCase() === "websocket") {
        const pair = new WebSocketPair();
        const [client, server] = [pair[0], pair[1]];
        this.ctx.acceptWebSocket(server);
        await this.#watchSocket(session, server, target, lastEventId, watcher);
        this.#guard.schedule();
        return new Response(null, { status: 101, webSocket: client });
      }
      return sseResponse(c, feed, lastEventId, watcher === undefined ? undefined : (end) => this.#guard.stream(watcher, end));
    });
    app.notFound(() => new Problem("route_not_found", "no such watch route").response());
    return app;
  }

  /** Alarm writes are not awaited (the output gate orders them); a failure is reported, not thrown. */
  #alarmWrite(write: Promise<void>): void {
    write.catch((error: unknown) => hostReport({ type: "alarm_write_failed", error }));
  }
}
