/**
 * SessionObject: one pico v3 session per Durable Object. It hosts the Harness over the
 * object's SQLite storage, keeps the session attached so accepted work always runs, multiplexes every
 * reason to wake onto the one alarm, and keeps two durable safety valves: the session fault record and
 * per-task kill counters (quarantine). Its public methods are Durable Object RPC methods: tests call them
 * through the stub, and the HTTP app (src/worker/http/app.ts) calls `createSession`, `op` (the op table of
 * session/op-table.ts, returned as Outcomes) and `destroy`. Its `fetch` and WebSocket handlers serve the
 * watch transports (session/watches.ts). Opening builds the harness with its turn kit, rig and GUPP
 * (session/opening.ts).
 *
 * A session exists only once `create` ran. The constructor writes nothing; every other operation on a
 * never-created object throws SessionNotFound and writes nothing (not even the schema).
 *
 * One concept over 400 lines: the session Durable Object's lifecycle (create, open and reopen, alarm,
 * fault and quarantine valves, delete, the RPC entry points), which all share the one open session.
 */
import { DurableObject } from "cloudflare:workers";
import type { Models } from "@earendil-works/pi-ai";
import { BACKGROUND_CONTEXT } from "../../core/call.js";
import { CommitLine } from "../../core/line.js";
import { initialValue, type Harness, type InitialValue } from "../../core/harness.js";
import type { Clock } from "../../core/host.js";
import type { Id } from "../../storage/records.js";
import { AlarmPlan, type AlarmStats } from "./alarm-plan.js";
import { directoryStub } from "../directory/object.js";
import { DirectoryLink, type DirectoryMeta, type RelabelAnswer } from "./directory-link.js";
import { relabelSession, type RelabelChange } from "./relabel.js";
import { ownerReaches, readOwner, recordOwner, type SessionAt, type SessionWhere } from "../identity/owner.js";
import type { ErasedOwner } from "../directory/erasures.js";
import type { Env } from "../env.js";
import { SessionNotFound } from "../errors.js";
import type { SessionInspection } from "../../api/responses.js";
import { afterCreateCommit, deployedVersion, HEARTBEAT_MS, hostClock, hostReport } from "../platform/host-config.js";
import { setLogLevel } from "../log.js";
import { sessionTurnKit } from "./kinds.js";
import { buildModels, defaultModel } from "../platform/models.js";
import { retryOptions } from "../platform/retry-config.js";
import { Problem, problemData, toProblem, type Outcome } from "../problems.js";
import type { SessionConfigBody } from "../schemas.js";
import type { SessionConfig } from "./api.js";
import { canonical, checkConfig, createValues, normalizeConfig } from "./config.js";
import type { CreateConfig, SessionOps } from "./ops.js";
import { sessionOpTable } from "./op-table.js";
import { openSession, rigIsPaused, type OpenSession } from "./opening.js";
import { rigPaused } from "../../rig/state.js";
import { inspectSession, sessionCounters } from "./inspection.js";
import { SessionWatches } from "./watches.js";
import { importRetention, TEMPLATE_KEY, type RetentionSource, type TemplateBinding } from "../directory/templates.js";
import { objectOutbox, type Outbox } from "../outbox/outbox.js";
import { LimitsMeter } from "../limits/meter.js";
import { selectableTools, sessionCatalog, type CatalogCache } from "./tool-catalog.js";
import { profileVariables, type ProfileCache } from "./profiles.js";
import { sessionProfiles } from "./profile-source.js";
import { expireIdle, SessionRetention, type RetentionView } from "./retention.js";
import type { ImportResponse } from "../../api/transfer.js";
import { exportStream, importedRow, importInto, sessionExportHeader } from "./transfer.js";
import { CreatedCheck, sessionCreated } from "./created.js";
import { destroySession, type DestroyParts } from "./destroy.js";

export class SessionObject extends DurableObject<Env> {
  readonly #clock: Clock;
  readonly #version: string;
  readonly #alarms: AlarmPlan;
  readonly #created: CreatedCheck;
  /**
   * Opening, creating and reopening run one at a time (two creates must not both write a root). A FIFO
   * of its own, not the harness's line: the harness does not exist yet while it is being opened.
   */
  readonly #lifecycle = new CommitLine();
  #session: OpenSession | undefined;
  /** The last seq just after this object created its session (destroyUnused). */
  #createdSeq: number | undefined;
  #models: Promise<Models> | undefined;
  /** This session's row in its tenant's directory (GET /v1/sessions): sent on create, relabel, activity, delete. */
  readonly #directory: DirectoryLink;
  /** Events out: capture in the commit, delivery on the alarm (outbox/outbox.ts). */
  readonly #outbox: Outbox;
  /** The outbox counters (`backlog/dead`) this instance last sent the directory (undefined: none yet). */
  #outboxCounted: string | undefined;
  /** Usage reports to the tenant's limits, kept until acknowledged and resent on the alarm (limits/meter.ts). */
  readonly #meter: LimitsMeter;
  /** The tenant's tool catalog as this instance knows it (memory only; session/tool-catalog.ts). */
  readonly #catalog: CatalogCache;
  /** The tenant's profiles this session names, as this instance knows them (memory only; session/profiles.ts). */
  readonly #profiles: ProfileCache;
  /** The retention the session was created with, on its own alarm (session/retention.ts). */
  readonly #retention: SessionRetention;
  /** The tenant a session is being created for (before its directory link knows it). */
  #creatingFor: string | undefined;
  /** The watch transports, their sockets and the guard that closes users' watches (session/watches.ts). */
  readonly #watches: SessionWatches;
  readonly #ops = sessionOpTable(this, () => this.#outbox);

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    // Nothing is written here: a session exists only once `create` ran.
    setLogLevel(env.LOG_LEVEL);
    this.#clock = hostClock();
    this.#version = deployedVersion(env);
    this.#created = new CreatedCheck(ctx.storage);
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
      send: async (tenant, update) => {
        const answer = await directoryStub(env, tenant).apply(update);
        // The acknowledgment carries the tenant's default retention: a session created without a template keeps it.
        if (update.type === "upsert") this.#retention.tenantDefault(answer.retention);
        return answer;
      },
      unlink: (tenant, session, version) => directoryStub(env, tenant).unlinkOrphan(session, version),
      liveTasks: async () => {
        const session = this.#session;
        if (session === undefined || session.stale) return 0;
        return (await session.harness.storage.scanTasks({ live: true, limit: 1000 })).items.length;
      },
      counters: async () => {
        const session = this.#session;
        if (session === undefined || session.stale) return undefined;
        const outbox = this.#outbox.book.counts();
        this.#outboxCounted = `${outbox.backlog}/${outbox.dead}`;
        return sessionCounters(session, this.#version, outbox);
      },
      due: (at) => this.#alarms.directory(at, this.#clock.now()),
      report: (error) => hostReport({ type: "directory_update_failed", error }),
    });
    this.#retention = new SessionRetention({
      kv: ctx.storage.kv,
      clock: this.#clock,
      lastActivity: () => this.#directory.lastActivityAt,
      due: (at) => this.#alarms.retention(at, this.#clock.now()),
    });
    this.#outbox = objectOutbox(
      ctx,
      env,
      this.#clock,
      () => {
        const where = this.#directory.where;
        const incarnation = this.#session?.incarnation;
        return where === undefined || incarnation === undefined ? where : { ...where, incarnation };
      },
      (at) => {
        this.#alarms.outbox(at, this.#clock.now());
        // A delivery round changes the outbox counters without a commit: the directory hears of it (batched), only
        // when they differ from what it was last sent (else an idle session would send, and wake, every minute).
        const counts = this.#outbox.book.counts();
        if (`${counts.backlog}/${counts.dead}` !== (this.#outboxCounted ?? "0/0")) this.#directory.counted();
      },
    );
    this.#meter = new LimitsMeter({
      env,
      kv: ctx.storage.kv,
      now: () => this.#clock.now(),
      due: (at) => this.#alarms.limits(at, this.#clock.now()),
    });
    this.#catalog = sessionCatalog(env, this.#clock, () => this.#directory.where?.tenant ?? this.#creatingFor);
    this.#profiles = sessionProfiles(env, this.#clock, () => this.#directory.where?.tenant ?? this.#creatingFor);
    this.#watches = new SessionWatches(
      ctx,
      env,
      this.#clock,
      (at) => this.#alarms.watches(at, this.#clock.now()),
      () => this.#acquire(),
    );
  }

  // RPC ---------------------------------------------------------------------------------------------

  /**
   * Create the session: migrate the schema and open the harness, committing the root conversation with
   * `rootValues`, then attach it. A second create on an existing session changes nothing.
   */
  create(config: CreateConfig = {}): Promise<{ readonly created: boolean }> {
    return this.#lifecycle.run(async () => {
      if (this.#created.created) return { created: false };
      await this.#open(config.rootValues ?? []);
      return { created: true };
    });
  }

  exists(): boolean {
    return this.#created.created;
  }

  /**
   * The session's incarnation (src/kinds/incarnation.ts), minted by its creating commit: what the Worker keys
   * this session's limits reservations by. Undefined when the session does not exist or predates incarnations.
   */
  async incarnation(): Promise<string | undefined> {
    if (!this.#created.created) return undefined;
    return (await this.#acquire()).incarnation;
  }

  async inspect(): Promise<SessionInspection> {
    return inspectSession(await this.#acquire(), this.#version);
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
        // The session was opened faulted, so GUPP was not: pending and answered hooks are re-checked now (unless the
        // rig is paused: its resume opens GUPP).
        if (!(await rigIsPaused(session.harness))) await session.gupp.open();
      }
      this.#directory.status(session.status(true));
      return { cleared };
    });
  }

  /**
   * Resume a paused rig (`rig.paused`, set by an import): one commit deletes the flag, and GUPP starts with the
   * session's work as at an open (unless the session is faulted: clearing the fault starts it then); the witness
   * patrols again at its next patrol. Returns whether it was paused.
   */
  rigResume(): Promise<{ readonly resumed: boolean }> {
    return this.#lifecycle.run(async () => {
      const session = await this.#acquireNow();
      const resumed = await session.harness.commit(async (tx) => {
        const value = tx.value(rigPaused);
        if ((await value.get()) === undefined) return false;
        value.delete();
        return true;
      }, BACKGROUND_CONTEXT);
      if (session.book.fault() === undefined) await session.gupp.open();
      return { resumed };
    });
  }

  /** Give a quarantined task a fresh kill count: execute/recover start again. */
  async releaseQuarantine(taskId: Id): Promise<void> {
    const session = await this.#acquire();
    session.book.release(taskId);
    await session.harness.driver.release(taskId);
    this.#directory.status(session.status(true));
  }

  // HTTP API (src/worker/http/app.ts) ---------------------------------------------------------------------

  /**
   * PUT /v1/sessions/{session}: create with this config (defaults filled in), or compare with the config
   * the session was created with: the same answers `created: false`, a different one is a conflict.
   * Nothing is written unless the session is created now. With `where` (the HTTP layer's tenant and
   * name), a created session is announced to its tenant's directory with the body's title and labels.
   */
  createSession(
    body: SessionConfigBody,
    where?: SessionWhere,
    template?: TemplateBinding,
    retention?: RetentionSource,
  ): Promise<Outcome<{ readonly created: boolean; readonly config: SessionConfig }>> {
    return this.#outcome(() =>
      this.#lifecycle.run(async () => {
        const models = await this.#modelsOf();
        const config = normalizeConfig(body, defaultModel(this.env), models);
        if (this.#created.created) {
          // Another user's session answers as an unknown one does, and nothing changes (identity/user-access.ts).
          if (where?.owner !== undefined && where.granted !== true && readOwner(this.ctx.storage.kv) !== where.owner)
            throw new SessionNotFound();
          const session = await this.#acquireNow();
          const stored = (await session.api.summary()).config;
          if (stored !== undefined && canonical(stored) !== canonical(config)) {
            throw new Problem(
              "session_config_conflict",
              `the session exists with config ${canonical(stored)}; this request asks for ${canonical(config)}`,
            );
          }
          // A create cut after its commit (the object died) left its binding or link unwritten: the retry repairs them.
          await this.#completeCreate(body, where, template, retention);
          return { created: false, config: stored ?? config };
        }
        const kit = sessionTurnKit(models, { turn: retryOptions(this.env) });
        this.#creatingFor = where?.tenant;
        recordOwner(this.ctx.storage.kv, where?.owner);
        checkConfig(models, await selectableTools(kit.tools.names(), this.#catalog, config.selectedTools), config);
        await this.#open([
          ...createValues(config),
          ...(body.variables === undefined ? [] : [initialValue(profileVariables, body.variables)]),
        ]);
        afterCreateCommit();
        this.#createdSeq = this.#session?.harness.storage.lastSeq;
        await this.#completeCreate(body, where, template, retention);
        return { created: true, config };
      }),
    );
  }

  /**
   * After the creating commit: write the template binding, the directory link and the retention, each unless it is
   * already written (so a retried create repairs what a create cut after its commit left missing).
   */
  async #completeCreate(
    body: SessionConfigBody,
    where?: SessionWhere,
    template?: TemplateBinding,
    retention?: RetentionSource,
  ): Promise<void> {
    if (template !== undefined && this.ctx.storage.kv.get(TEMPLATE_KEY) === undefined)
      this.ctx.storage.kv.put(TEMPLATE_KEY, template);
    // Only a session with a directory row has a last activity to count from. Kept before the link is written, so
    // the acknowledgment of its first row can settle a tenant default (session/retention.ts).
    if (where !== undefined) this.#retention.capture(retention);
    if (where !== undefined && this.#directory.where === undefined) {
      await this.#directory.created({
        tenant: where.tenant,
        session: where.session,
        owner: where.owner,
        ...(body.title === undefined ? {} : { title: body.title }),
        ...(body.labels === undefined ? {} : { labels: body.labels }),
        ...(body.metadata === undefined ? {} : { metadata: body.metadata }),
      });
    }
    if (where !== undefined) this.#retention.arm();
  }

  /** One API operation (see SessionOps); a never-created session is `session_not_found` and writes nothing. */
  op<K extends keyof SessionOps>(name: K, ...args: SessionOps[K]["args"]): Promise<Outcome<SessionOps[K]["result"]>> {
    return this.#outcome(async () => {
      const session = await this.#acquire();
      const handler = this.#ops[name] as (
        session: OpenSession,
        ...args: SessionOps[K]["args"]
      ) => Promise<SessionOps[K]["result"]>;
      return handler(session, ...args);
    });
  }

  /**
   * `op` for end user `sub`, with the owner check in the same call (identity/user-access.ts OWNER_IN_OP): a session
   * the user does not reach answers `session_not_found`, as an unknown one does.
   */
  opAs<K extends keyof SessionOps>(
    sub: string,
    name: K,
    ...args: SessionOps[K]["args"]
  ): Promise<Outcome<SessionOps[K]["result"]>> {
    if (!this.reaches(sub, false)) return this.#outcome(() => Promise.reject(new SessionNotFound()));
    return this.op(name, ...args);
  }

  /** PATCH /v1/sessions/{session}: the directory title, labels and metadata, and the variables (session/relabel.ts). */
  relabel(change: RelabelChange, variables?: Readonly<Record<string, string | null>>): Promise<Outcome<RelabelAnswer>> {
    return this.#outcome(async () => relabelSession(await this.#acquire(), this.#directory, change, variables));
  }

  /**
   * Whether end user `sub` reaches this session (it owns it, or `creating` and nobody created it):
   * identity/user-access.ts.
   */
  reaches(sub: string, creating: boolean): boolean {
    return ownerReaches(this.ctx.storage.kv, this.#created.created, sub, creating);
  }

  /** The directory title, labels and metadata (undefined: not created over HTTP). */
  directoryMeta(): DirectoryMeta | undefined {
    return this.#directory.meta();
  }

  /** GET /v1/sessions/{session}: the directory title, labels and metadata, and the retention (undefined: none). */
  details(): { readonly meta?: DirectoryMeta; readonly retention?: RetentionView } {
    const meta = this.#directory.meta();
    const retention = this.#created.created ? this.#retention.view() : undefined;
    return { ...(meta === undefined ? {} : { meta }), ...(retention === undefined ? {} : { retention }) };
  }

  /** The template this session was created from (what its users may set), and whether it exists. */
  templateBinding(): { readonly exists: boolean; readonly binding?: TemplateBinding } {
    const binding = this.#created.created ? this.ctx.storage.kv.get<TemplateBinding>(TEMPLATE_KEY) : undefined;
    return { exists: this.#created.created, ...(binding === undefined ? {} : { binding }) };
  }

  /** A revocation from the tenant's directory: close `sub`'s watches issued before `before` (Unix seconds). */
  closeWatches(sub: string, before: number): { readonly closed: number } {
    return this.#created.created ? this.#watches.revoke(sub, before) : { closed: 0 };
  }

  /**
   * DELETE /v1/sessions/{session}: close the harness, end watchers, delete every row and the alarm, then send the
   * directory its tombstone. With `where` (the HTTP layer's tenant and name), a session this object does not hold but
   * the directory still lists (a delete cut between its wipe and its tombstone) is unlinked and answers deleted; the
   * directory is asked on the lifecycle queue, so no create of the name runs in between.
   */
  destroy(where?: SessionAt): Promise<Outcome<{ readonly deleted: boolean }>> {
    return this.#destroy(where);
  }

  /** A user erasure's delete (directory/erasure-run.ts): `destroy`, only if the session is `erased`'s (else kept). */
  eraseFor(where: SessionAt, erased: ErasedOwner): Promise<Outcome<{ readonly deleted: boolean }>> {
    return this.#destroy(where, erased);
  }

  /**
   * A create undone (a routed delivery refused at admission): `destroy`, only if nothing committed after this object's
   * creating commit (kept in memory: after a restart nothing is deleted).
   */
  destroyUnused(where: SessionAt): Promise<Outcome<{ readonly deleted: boolean }>> {
    return this.#destroy(where, undefined, async (open) => open.harness.storage.lastSeq === this.#createdSeq);
  }

  /** The delete itself (session/destroy.ts), on the lifecycle queue. */
  #destroy(
    where?: SessionAt,
    erased?: ErasedOwner,
    expiry?: (session: OpenSession) => Promise<boolean>,
  ): Promise<Outcome<{ readonly deleted: boolean }>> {
    const parts: DestroyParts = {
      env: this.env,
      storage: this.ctx.storage,
      created: this.#created,
      directory: this.#directory,
      watches: this.#watches,
      meter: this.#meter,
      outbox: this.#outbox,
      alarms: this.#alarms,
      retention: this.#retention,
      now: () => this.#clock.now(),
      session: () => this.#session,
      forgetSession: () => (this.#session = undefined),
    };
    return this.#outcome(() => this.#lifecycle.run(() => destroySession(parts, where, erased, expiry)));
  }

  /**
   * GET /v1/sessions/{session}/export: the session as JSONL (session/transfer.ts), streamed. `redacted`: a user's
   * export (tasks as `presentTaskToUser` shows them; not importable).
   */
  exportSession(name: string, redacted: boolean): Promise<Outcome<ReadableStream<Uint8Array>>> {
    return this.#outcome(async () => {
      const session = await this.#acquire();
      const header = sessionExportHeader(this.ctx.storage.kv, {
        name,
        redacted,
        incarnation: session.incarnation,
        lastSeq: session.harness.storage.lastSeq,
        meta: this.#directory.meta(),
        profile: (await session.api.summary()).config?.profile,
      });
      return exportStream(this.ctx.storage, header);
    });
  }

  /**
   * POST /v1/sessions/{session}/import: stage `body` (an export) into this object, which must hold no session;
   * only when every line validated are the owner, template and directory link written and the session opened,
   * its live work settled (session/transfer.ts). A bad line is `invalid_import` naming it, and the object is
   * wiped: nothing is left behind.
   */
  importSession(
    where: { readonly tenant: string; readonly session: string },
    body: ReadableStream<Uint8Array>,
  ): Promise<Outcome<ImportResponse>> {
    return this.#outcome(() =>
      this.#lifecycle.run(async () => {
        let retention: RetentionSource | undefined;
        const imported = importInto(this.ctx.storage, where.session, body, {
          exists: () => sessionCreated(this.ctx.storage),
          open: () => this.#session !== undefined,
          admit: async (header) => {
            // While the user is being erased, its sessions are being deleted: an import of one would outlive it.
            if (header.owner !== undefined && (await directoryStub(this.env, where.tenant).erasing(header.owner)))
              throw new Problem(
                "user_erasing",
                `user ${header.owner} is being erased; import their sessions once its erasure is done`,
              );
            retention = await importRetention(this.env, where.tenant, header.template);
          },
          settle: (header) => {
            this.#retention.capture(retention);
            this.#directory.record({ ...where, owner: header.owner, ...importedRow(header) });
          },
          link: async () => {
            this.#creatingFor = where.tenant;
            this.#created.wiped();
            // Open unless open already (a retry finds the session it settled, perhaps in use since).
            await this.#acquireNow();
            await this.#directory.flush();
            this.#retention.arm();
          },
          wiped: () => {
            this.#retention.cleared();
            this.#meter.cleared();
          },
          now: () => this.#clock.now(),
        });
        return imported.finally(() => this.#created.wiped());
      }),
    );
  }

  /** Watch transports: SSE and WebSocket upgrades forwarded by the Worker after auth (watch routes). */
  override async fetch(request: Request): Promise<Response> {
    return this.#watches.fetch(request);
  }

  override async webSocketClose(ws: WebSocket, code: number, reason: string): Promise<void> {
    this.#watches.closed(ws, code, reason);
  }

  override async webSocketError(ws: WebSocket): Promise<void> {
    this.#watches.drop(ws);
  }

  override async webSocketMessage(ws: WebSocket, message: string | ArrayBuffer): Promise<void> {
    // Watch sockets are one-way; anything but the auto-answered "ping" is ignored.
    void ws;
    void message;
  }

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
      this.#watches.sweep();
      if (this.#created.created) {
        // Opening attaches unless the durable fault record says not to auto-drive the session.
        await this.#acquire();
      }
      // A directory update not yet acknowledged (also a deleted session's tombstone) is retried.
      await this.#directory.alarm();
      await this.#outbox.alarm();
      // A usage report the tenant's limits have not acknowledged is resent.
      await this.#meter.alarm();
      // Expired GitHub signatures go without waiting for the next delivery (session/replays.ts).
      const session = this.#session;
      if (session !== undefined && !session.stale) await session.replays.alarm();
      await this.#expire();
    } catch (error) {
      hostReport({ type: "alarm_failed", error });
    }
  }

  /**
   * Retention on the alarm (session/retention.ts): an idle session past its expiry commits its expiry (reported as
   * `session.expired`), then is deleted as DELETE deletes it once its outbox holds nothing undelivered. Live work
   * keeps it; live work, or any commit, that came after the expiry was committed cancels the expiry (the mark is
   * deleted and the alarm armed for the next expiry).
   */
  async #expire(): Promise<void> {
    const session = this.#session;
    const where = this.#directory.where;
    if (session === undefined || session.stale || where === undefined) return;
    await expireIdle({
      harness: session.harness,
      retention: this.#retention,
      now: this.#clock.now(),
      outbox: this.#outbox,
      destroy: async (stillExpired) => {
        const outcome = await this.#destroy(where, undefined, (open) => stillExpired(open.harness));
        if (!outcome.ok) {
          hostReport({ type: "alarm_failed", error: outcome.problem });
          return "failed";
        }
        if (outcome.value.deleted) return "deleted";
        // Kept: revived on this harness while it is open, else on the next alarm (which reopens the session).
        return this.#session === session ? "kept" : "closed";
      },
    });
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
      this.#watches.forget();
      // Join the old harness's calls before a new one takes the same storage (close is shared and safe
      // after a fault or shutdown).
      await current.harness
        .close(BACKGROUND_CONTEXT)
        .catch((error: unknown) => hostReport({ type: "harness", report: error }));
    }
    if (!this.#created.created) throw new SessionNotFound();
    return this.#open(undefined);
  }

  /**
   * Open the session (session/opening.ts) and hold it; `rootValues` is given only by create (empty
   * storage gets its root then).
   */
  #open(rootValues: readonly InitialValue[] | undefined): Promise<OpenSession> {
    return openSession(
      {
        ctx: this.ctx,
        env: this.env,
        clock: this.#clock,
        version: this.#version,
        alarms: this.#alarms,
        directory: this.#directory,
        outbox: this.#outbox,
        meter: this.#meter,
        catalog: this.#catalog,
        profiles: this.#profiles,
        models: () => this.#modelsOf(),
        faulted: (harness) => {
          if (this.#session?.harness === harness) this.#session.stale = true;
        },
        opened: async (session) => {
          this.#session = session;
          session.harness.onCommit(() => this.#retention.committed());
          this.#retention.opened();
          await this.#watches.rewatch(session);
        },
      },
      rootValues,
    );
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

  /** Alarm writes are not awaited (the output gate orders them); a failure is reported, not thrown. */
  #alarmWrite(write: Promise<void>): void {
    write.catch((error: unknown) => hostReport({ type: "alarm_write_failed", error }));
  }
}
