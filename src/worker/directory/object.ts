/**
 * DirectoryObject: one Durable Object per tenant listing that tenant's sessions (docs/api.md
 * "Directory"; the rows, their search indexes and their schema are directory/sessions.ts). Session objects send it
 * full-row updates (create, activity at most once a minute, a status change, title/labels/metadata changes, delete) and retry an update from their alarm until this object
 * acknowledges it (session/directory-link.ts). `GET /v1/sessions` reads `list`.
 *
 * Every update carries a version (the sender's clock, strictly increasing per session): an update older
 * than the row's version is acknowledged and ignored, so a late retry cannot undo a newer state. A
 * delete leaves a tombstone with its version for the same reason; tombstones are never listed.
 *
 * It also keeps the tenant's tool catalog (docs/tools.md; the block at the end of this file): the
 * `/v1/tools` routes write it, and sessions read it through `catalog(version)`; and the tenant's MCP
 * servers (docs/mcp.md; directory/mcp.ts), whose selectable tools `catalog(version)` answers too.
 * Its webhook endpoints (directory/endpoints.ts), identity providers (directory/issuers.ts), API keys
 * (directory/api-keys.ts), profiles (directory/profiles.ts) and inbound endpoints (directory/inbound.ts) are small
 * stores of their own in the same SQLite.
 */
import { DurableObject } from "cloudflare:workers";
import type { Env } from "../env.js";
import {
  EndpointStore,
  type EndpointInput,
  type EndpointPatch,
  type EndpointRecord,
  type SessionEndpoint,
} from "./endpoints.js";
import {
  UserStore,
  type DeleteTemplateOutcome,
  type PutTemplateOutcome,
  type Revocation,
  type TemplateIfMatch,
} from "./users.js";
import type { TemplateDefinition, TemplateRecord } from "../../api/templates.js";
import { IssuerStore, type IssuerInput, type IssuerRecord, type PutIssuerOutcome } from "./issuers.js";
import { ApiKeyStore, type ApiKeyInput, type ApiKeyRecord, type CreateApiKeyOutcome } from "./api-keys.js";
import { TenantInboundStore, type PutTenantInboundOutcome, type TenantInboundRecord } from "./inbound.js";
import type { JsonObject } from "../../storage/records.js";
import { sealSecret, type SealedSecret } from "../crypto/sealed-secrets.js";
import { hostClock } from "../platform/host-config.js";
import type { CatalogRecord, ToolDefinition } from "../../kinds/catalog-types.js";
import { McpServerStore, toolRecord, type McpServerRpc, type McpServerWrite, type McpSnapshotWrite } from "./mcp.js";
import {
  bumpCatalog,
  catalogVersion,
  createCatalogTables,
  liveToolCount,
  matches,
  MAX_DEFINITION_BYTES,
  MAX_LIVE_TOOLS,
  secretGenerations,
  toolRow,
  withGeneration,
  type CatalogSnapshot,
  type DeleteToolOutcome,
  type IfMatch,
  type PutToolOutcome,
  type RotateToolSecretOutcome,
  type SecretGenerations,
  type ToolCatalogRpc,
} from "./catalog.js";
import type { McpServerRecord } from "./mcp-snapshot.js";
import {
  ProfileStore,
  type DeleteProfileOutcome,
  type ProfileIfMatch,
  type ProfileRpc,
  type PutProfileOutcome,
} from "./profiles.js";
import type { ProfileRecord, ProfileSection } from "../../api/profiles.js";
import { ErasureStore, type ErasureRecord, type StartOutcome } from "./erasures.js";
import { keyedSubHash, plainSubHash, subHashes, type SubHashes } from "./subject-hash.js";
import { ERASE_BATCH, eraseRound, erasureSealContext } from "./erasure-run.js";
import {
  migrateDirectory,
  SessionDirectory,
  type DirectoryPage,
  type DirectoryQuery,
  type DirectoryStats,
  type DirectoryUpdate,
} from "./sessions.js";
import type { Retention } from "../../api/schemas.js";

/** Where the tenant's default retention is kept (the directory's KV; docs/operations.md "Retention"). */
const RETENTION_KEY = "directory.retention";

export { decodeCursor, encodeCursor } from "./sessions.js";
export { MAX_DEFINITION_BYTES, MAX_LIVE_TOOLS } from "./catalog.js";
export type {
  CatalogSnapshot,
  DeleteToolOutcome,
  IfMatch,
  PutToolOutcome,
  RotateToolSecretOutcome,
  SecretGenerations,
  ToolCatalogRpc,
} from "./catalog.js";
export type {
  DirectoryEntry,
  DirectoryPage,
  DirectoryQuery,
  DirectoryStats,
  DirectoryUpdate,
  SessionCounters,
} from "./sessions.js";

/** The RPC surface as callers see it through a stub. */
export interface DirectoryRpc extends ToolCatalogRpc, McpServerRpc, ProfileRpc {
  /**
   * A session's row or tombstone. The answer carries the tenant's default retention, so a session created without a
   * template learns it from the acknowledgment of its first row, with no call of its own (docs/operations.md).
   */
  apply(update: DirectoryUpdate): Promise<{ readonly acknowledged: true; readonly retention?: Retention }>;
  /**
   * Unlink a session the directory lists but whose object no longer holds it (a delete cut between its wipe and its
   * tombstone): a tombstone newer than the row and `version`. Whether it was listed.
   */
  unlinkOrphan(session: string, version: number): Promise<{ readonly unlinked: boolean }>;
  list(query: DirectoryQuery): Promise<DirectoryPage>;
  /** The tenant's totals over the sessions' pushed counters (GET /v1/stats). */
  stats(): Promise<DirectoryStats>;
  // Webhook endpoints (events out) ---------------------------------------------------------------
  createEndpoint(id: string, input: EndpointInput, secret: SealedSecret): Promise<EndpointRecord | undefined>;
  listEndpoints(): Promise<EndpointRecord[]>;
  getEndpoint(id: string): Promise<EndpointRecord | undefined>;
  patchEndpoint(id: string, patch: EndpointPatch): Promise<EndpointRecord | undefined>;
  deleteEndpoint(id: string): Promise<boolean>;
  rotateEndpointSecret(id: string, secret: SealedSecret): Promise<EndpointRecord | undefined>;
  disableEndpoint(id: string, failingSince: number, reason: string): Promise<{ readonly disabled: boolean }>;
  sessionEndpoints(session: string): Promise<SessionEndpoint[]>;
  // End users (docs/users.md; directory/users.ts) ---------------------------------------------------
  putTemplate(name: string, definition: TemplateDefinition, ifMatch?: TemplateIfMatch): Promise<PutTemplateOutcome>;
  getTemplate(name: string): Promise<TemplateRecord | undefined>;
  /** At a session create: the named template (if any) and the tenant's default retention, in one call. */
  sessionDefaults(template: string): Promise<{ readonly template?: TemplateRecord; readonly retention?: Retention }>;
  /** The tenant's default retention (docs/operations.md "Retention"); null clears it. */
  setRetention(retention: Retention | null): Promise<Retention | undefined>;
  retention(): Promise<Retention | undefined>;
  listTemplates(): Promise<TemplateRecord[]>;
  deleteTemplate(name: string, ifMatch?: TemplateIfMatch): Promise<DeleteTemplateOutcome>;
  revokedAt(sub: string): Promise<number | undefined>;
  // User erasures (docs/operations.md "Deleting a user's data"; directory/erasures.ts) --------------------
  eraseUser(sub: string, tenant: string): Promise<StartOutcome>;
  /** The sessions that may hold `sub`'s open watches (an erasure closes them at once, as a revocation does). */
  watchedSessions(sub: string): Promise<string[]>;
  erasure(id: string): Promise<ErasureRecord | undefined>;
  erasing(sub: string): Promise<boolean>;
  revokeUser(sub: string, at: number): Promise<Revocation>;
  userWatching(sub: string, session: string, until: number, now: number): Promise<number | undefined>;
  // Identity providers (directory/issuers.ts) ------------------------------------------------------
  putIssuer(name: string, input: IssuerInput, limit: number): Promise<PutIssuerOutcome>;
  listIssuers(): Promise<IssuerRecord[]>;
  getIssuer(name: string): Promise<IssuerRecord | undefined>;
  deleteIssuer(name: string): Promise<boolean>;
  // API keys (directory/api-keys.ts) ----------------------------------------------------------------
  createApiKey(id: string, input: ApiKeyInput, limit: number): Promise<CreateApiKeyOutcome>;
  listApiKeys(): Promise<ApiKeyRecord[]>;
  deleteApiKey(id: string): Promise<boolean>;
  /** The key when `hash` is its secret's and it has not expired; its last use recorded at most hourly. */
  verifyApiKey(id: string, hash: string): Promise<ApiKeyRecord | undefined>;
  // The tenant's inbound endpoints (directory/inbound.ts) ------------------------------------------
  putInbound(
    name: string,
    config: JsonObject,
    secret: SealedSecret,
    keepSecret: boolean,
  ): Promise<PutTenantInboundOutcome>;
  getInbound(name: string): Promise<TenantInboundRecord | undefined>;
  listInbound(): Promise<TenantInboundRecord[]>;
  deleteInbound(name: string): Promise<boolean>;
  rotateInbound(name: string, secret: SealedSecret): Promise<TenantInboundRecord | undefined>;
}

export class DirectoryObject extends DurableObject<Env> {
  /**
   * Test access (through runInDurableObject, never RPC): while above zero, each `apply` and `unlinkOrphan` is
   * refused and counts this down, so tests can see a session retry an unacknowledged update from its alarm.
   */
  refusing = 0;

  /** The session rows (directory/sessions.ts). */
  readonly #sessions: SessionDirectory;
  /**
   * Memory copy of the tenant's default retention (null: not read yet). This object is the only writer of its key
   * (setRetention), so an `apply` answers it without reading a row.
   */
  #retention: Retention | undefined | null = null;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    migrateDirectory(ctx.storage);
    this.#sessions = new SessionDirectory(ctx.storage.sql);
    createCatalogTables(ctx.storage.sql);
    // A kill can land between an erasure's step and its re-arm: every new instance arms what is still due.
    void ctx.blockConcurrencyWhile(() => this.#arm());
  }

  /**
   * A row of a user's session created before that user's erasure cutoff is not listed: the erasure takes the session
   * and deletes it (directory/erasures.ts `claim`), whether it is still running or finished before the row came.
   */
  apply(update: DirectoryUpdate): Promise<{ readonly acknowledged: true }> {
    if (this.refusing > 0) {
      this.refusing -= 1;
      throw new Error("the directory refuses updates (test fault injection)");
    }
    return this.#apply(update);
  }

  async #apply(update: DirectoryUpdate): Promise<{ readonly acknowledged: true }> {
    // Hashed before anything is read: the rest is one synchronous step.
    const hash = update.type === "upsert" && update.owner !== undefined ? await this.#hashes(update.owner) : undefined;
    const claimed =
      hash !== undefined &&
      update.type === "upsert" &&
      this.#sessions.newer(update) &&
      this.#erasures.claim(hash, update.session, update.createdAt, hostClock().now());
    if (claimed) await this.#arm();
    else this.#sessions.apply(update);
    const retention = this.retention();
    return { acknowledged: true, ...(retention === undefined ? {} : { retention }) };
  }

  unlinkOrphan(session: string, version: number): { readonly unlinked: boolean } {
    if (this.refusing > 0) {
      this.refusing -= 1;
      throw new Error("the directory refuses updates (test fault injection)");
    }
    return { unlinked: this.#sessions.unlink(session, version) };
  }

  /** Newest activity first (ties by session name); the filters of `GET /v1/sessions` (directory/sessions.ts). */
  list(query: DirectoryQuery): DirectoryPage {
    return this.#sessions.list(query);
  }

  /** The tenant's totals over the sessions' pushed counters (directory/sessions.ts). */
  stats(): DirectoryStats {
    return this.#sessions.stats();
  }

  // Webhook endpoints (events out; directory/endpoints.ts) ------------------------------------------

  #endpointStore: EndpointStore | undefined;

  get #endpoints(): EndpointStore {
    this.#endpointStore ??= new EndpointStore(this.ctx.storage.sql);
    return this.#endpointStore;
  }

  createEndpoint(id: string, input: EndpointInput, secret: SealedSecret): EndpointRecord | undefined {
    return this.#endpoints.create(id, input, secret, hostClock().now());
  }

  listEndpoints(): EndpointRecord[] {
    return this.#endpoints.list();
  }

  getEndpoint(id: string): EndpointRecord | undefined {
    return this.#endpoints.get(id);
  }

  patchEndpoint(id: string, patch: EndpointPatch): EndpointRecord | undefined {
    return this.#endpoints.patch(id, patch, hostClock().now());
  }

  deleteEndpoint(id: string): boolean {
    return this.#endpoints.delete(id);
  }

  rotateEndpointSecret(id: string, secret: SealedSecret): EndpointRecord | undefined {
    return this.#endpoints.rotate(id, secret, hostClock().now());
  }

  disableEndpoint(id: string, failingSince: number, reason: string): { readonly disabled: boolean } {
    return this.#endpoints.disable(id, failingSince, reason, hostClock().now());
  }

  sessionEndpoints(session: string): SessionEndpoint[] {
    return this.#endpoints.forSession(session);
  }

  // End users: templates, revocations, watches (docs/users.md; directory/users.ts) -------------------

  #userStore: UserStore | undefined;

  get #users(): UserStore {
    this.#userStore ??= new UserStore(this.ctx.storage.sql);
    return this.#userStore;
  }

  /** A template naming a profile the tenant does not hold is refused here, in the step that writes it. */
  putTemplate(name: string, definition: TemplateDefinition, ifMatch?: TemplateIfMatch): PutTemplateOutcome {
    if (typeof definition.profile === "string" && !this.#profiles.has(definition.profile))
      return { type: "unknown_profile", profile: definition.profile };
    return this.#users.putTemplate(name, definition, Date.now(), ifMatch);
  }

  getTemplate(name: string): TemplateRecord | undefined {
    return this.#users.getTemplate(name);
  }

  sessionDefaults(template: string): { readonly template?: TemplateRecord; readonly retention?: Retention } {
    const record = this.#users.getTemplate(template);
    const retention = this.retention();
    return { ...(record === undefined ? {} : { template: record }), ...(retention === undefined ? {} : { retention }) };
  }

  setRetention(retention: Retention | null): Retention | undefined {
    if (retention === null) this.ctx.storage.kv.delete(RETENTION_KEY);
    else this.ctx.storage.kv.put(RETENTION_KEY, { deleteAfterDays: retention.deleteAfterDays });
    this.#retention = null;
    return this.retention();
  }

  retention(): Retention | undefined {
    if (this.#retention === null) this.#retention = this.ctx.storage.kv.get<Retention>(RETENTION_KEY);
    return this.#retention;
  }

  listTemplates(): TemplateRecord[] {
    return this.#users.listTemplates();
  }

  deleteTemplate(name: string, ifMatch?: TemplateIfMatch): DeleteTemplateOutcome {
    return this.#users.deleteTemplate(name, ifMatch);
  }

  /** The later of the user's revocation and its erasures' cutoffs (an erasure keeps only the sub's hash). */
  async revokedAt(sub: string): Promise<number | undefined> {
    const hash = await this.#hashes(sub);
    const revoked = this.#users.revokedAt(sub);
    const erased = this.#erasures.cutoffFor(hash);
    return revoked === undefined ? erased : erased === undefined ? revoked : Math.max(revoked, erased);
  }

  revokeUser(sub: string, at: number): Revocation {
    return this.#users.revoke(sub, at);
  }

  async userWatching(sub: string, session: string, until: number, now: number): Promise<number | undefined> {
    const hash = await this.#hashes(sub);
    const revoked = this.#users.watching(sub, session, until, now);
    const erased = this.#erasures.cutoffFor(hash);
    return revoked === undefined ? erased : erased === undefined ? revoked : Math.max(revoked, erased);
  }

  // User erasures (docs/operations.md "Deleting a user's data"; directory/erasures.ts, erasure-run.ts) ---

  /** Test access (through runInDurableObject): sessions deleted per erasure per alarm round. */
  eraseBatch = ERASE_BATCH;
  /**
   * Test access: when set, alarm rounds left to run; at zero the alarm runs none and does not re-arm (a test then
   * kills the object mid-erasure; the next instance re-arms).
   */
  eraseRoundsLeft: number | undefined;

  #erasureStore: ErasureStore | undefined;

  get #erasures(): ErasureStore {
    // The user tables first: an erasure's last step deletes from them.
    void this.#users;
    this.#erasureStore ??= new ErasureStore(this.ctx.storage.sql);
    return this.#erasureStore;
  }

  /**
   * Start erasing `sub` (or answer its erasure already running): the record, the cutoff its older tokens are refused
   * by, and the sessions the directory lists for it, in one step; the alarm does the rest.
   */
  async eraseUser(sub: string, tenant: string): Promise<StartOutcome> {
    // Keyed for the record (a missing SUBJECT_HASH_KEY refuses the erasure before anything is written); the plain one
    // finds an erasure of the user recorded before the keyed hash.
    const hash = { v1: await plainSubHash(sub), v2: await keyedSubHash(this.env, tenant, sub) };
    const id = `er_${crypto.randomUUID().replaceAll("-", "")}`;
    const sealed = await sealSecret(this.env, erasureSealContext(tenant, id), sub);
    const now = hostClock().now();
    const outcome = this.#erasures.start(id, sub, sealed, hash, tenant, Math.floor(now / 1000) + 1, now);
    if (outcome.type === "started") await this.#arm();
    return outcome;
  }

  watchedSessions(sub: string): string[] {
    return this.#erasures.watchedSessions(sub);
  }

  erasure(id: string): ErasureRecord | undefined {
    return this.#erasures.get(id);
  }

  /** Whether an erasure of `sub` is running (its creates are refused). */
  async erasing(sub: string): Promise<boolean> {
    return this.#erasures.running(await this.#hashes(sub));
  }

  /**
   * `sub`'s hash under both versions, for a synchronous step that follows at once: keyed once a keyed record exists
   * (its tenant's key), so a directory with none needs no SUBJECT_HASH_KEY. Hashed again if an erasure recorded the
   * first keyed record during the await.
   */
  async #hashes(sub: string): Promise<SubHashes> {
    for (;;) {
      const tenant = this.#erasures.keyedTenant();
      const hashes = await subHashes(this.env, tenant, sub);
      if (this.#erasures.keyedTenant() === tenant) return hashes;
    }
  }

  /** Erasures are the only reason this object wakes: one round, then the alarm at the next due time. */
  override async alarm(): Promise<void> {
    if (this.eraseRoundsLeft !== undefined) {
      if (this.eraseRoundsLeft <= 0) return;
      this.eraseRoundsLeft -= 1;
    }
    await eraseRound({ env: this.env, store: this.#erasures, endpoints: this.#endpoints, batch: this.eraseBatch });
    await this.#arm();
  }

  async #arm(): Promise<void> {
    const next = this.#erasures.nextDue();
    if (next === undefined) return;
    const current = await this.ctx.storage.getAlarm();
    if (current === null || current > next) await this.ctx.storage.setAlarm(next);
  }

  // The tenant's inbound endpoints (docs/integrations.md "Routing"; directory/inbound.ts) -------------

  #inboundStore: TenantInboundStore | undefined;

  get #inbound(): TenantInboundStore {
    this.#inboundStore ??= new TenantInboundStore(this.ctx.storage.sql);
    return this.#inboundStore;
  }

  putInbound(name: string, config: JsonObject, secret: SealedSecret, keepSecret: boolean): PutTenantInboundOutcome {
    return this.#inbound.put(name, config, secret, keepSecret, hostClock().now());
  }

  getInbound(name: string): TenantInboundRecord | undefined {
    return this.#inbound.get(name);
  }

  listInbound(): TenantInboundRecord[] {
    return this.#inbound.list();
  }

  deleteInbound(name: string): boolean {
    return this.#inbound.delete(name);
  }

  rotateInbound(name: string, secret: SealedSecret): TenantInboundRecord | undefined {
    return this.#inbound.rotate(name, secret, hostClock().now());
  }

  // Profiles (docs/api.md "Profiles"; directory/profiles.ts) ---------------------------------------

  #profileStore: ProfileStore | undefined;

  get #profiles(): ProfileStore {
    this.#profileStore ??= new ProfileStore(this.ctx.storage.sql);
    return this.#profileStore;
  }

  putProfile(name: string, sections: readonly ProfileSection[], ifMatch?: ProfileIfMatch): PutProfileOutcome {
    return this.#profiles.put(name, sections, Date.now(), ifMatch);
  }

  getProfile(name: string): ProfileRecord | undefined {
    return this.#profiles.get(name);
  }

  getProfileVersion(name: string, version: number): ProfileRecord | undefined {
    return this.#profiles.version(name, version);
  }

  hasProfile(name: string): boolean {
    return this.#profiles.has(name);
  }

  listProfiles(): ProfileRecord[] {
    return this.#profiles.list();
  }

  /** Refused while a template names the profile (checked in the same step as the delete). */
  deleteProfile(name: string, ifMatch?: ProfileIfMatch): DeleteProfileOutcome {
    const naming = this.#users
      .listTemplates()
      .filter((template) => template.profile === name)
      .map((template) => template.name);
    return this.#profiles.delete(name, naming, ifMatch);
  }

  // Identity providers (docs/users.md; directory/issuers.ts) --------------------------------------

  #issuerStore: IssuerStore | undefined;

  get #issuers(): IssuerStore {
    this.#issuerStore ??= new IssuerStore(this.ctx.storage.sql);
    return this.#issuerStore;
  }

  putIssuer(name: string, input: IssuerInput, limit: number): PutIssuerOutcome {
    return this.#issuers.put(name, input, limit, hostClock().now());
  }

  listIssuers(): IssuerRecord[] {
    return this.#issuers.list();
  }

  getIssuer(name: string): IssuerRecord | undefined {
    return this.#issuers.get(name);
  }

  deleteIssuer(name: string): boolean {
    return this.#issuers.delete(name);
  }

  // API keys (docs/users.md "API keys"; directory/api-keys.ts) ----------------------------------------

  #apiKeyStore: ApiKeyStore | undefined;

  get #apiKeys(): ApiKeyStore {
    this.#apiKeyStore ??= new ApiKeyStore(this.ctx.storage.sql);
    return this.#apiKeyStore;
  }

  createApiKey(id: string, input: ApiKeyInput, limit: number): CreateApiKeyOutcome {
    return this.#apiKeys.create(id, input, limit, hostClock().now());
  }

  listApiKeys(): ApiKeyRecord[] {
    return this.#apiKeys.list();
  }

  deleteApiKey(id: string): boolean {
    return this.#apiKeys.delete(id);
  }

  verifyApiKey(id: string, hash: string): ApiKeyRecord | undefined {
    return this.#apiKeys.verify(id, hash, hostClock().now());
  }

  // The tenant's tool catalog (docs/tools.md) ------------------------------------------------------

  /** Create or replace a tool (a tombstone is revived); bumps the catalog version. */
  putTool(name: string, definition: ToolDefinition, ifMatch?: IfMatch): PutToolOutcome {
    const sql = this.ctx.storage.sql;
    const current = toolRow(sql, name);
    const live = current !== undefined && !current.deleted;
    if (ifMatch !== undefined && !matches(current, ifMatch))
      return { type: "precondition", ...(live ? { current: current.version } : {}) };
    const text = JSON.stringify(definition);
    const bytes = new TextEncoder().encode(text).length;
    if (bytes > MAX_DEFINITION_BYTES) return { type: "too_large", bytes, limit: MAX_DEFINITION_BYTES };
    if (!live && liveToolCount(sql) >= MAX_LIVE_TOOLS) return { type: "too_many", limit: MAX_LIVE_TOOLS };
    // An HTTP tool's calls sign with its secret's current generation (a replaced definition keeps it).
    const stored = withGeneration(definition, secretGenerations(sql, name).current);
    const version = bumpCatalog(sql);
    const updatedAt = Date.now();
    sql.exec(
      `INSERT INTO tools (name, version, deleted, definition, updated_at) VALUES (?, ?, 0, ?, ?)
       ON CONFLICT (name) DO UPDATE SET version = excluded.version, deleted = 0, definition = excluded.definition, updated_at = excluded.updated_at`,
      name,
      version,
      JSON.stringify(stored),
      updatedAt,
    );
    const wasHttp = live && current.definition?.handler.type === "http";
    return {
      type: "stored",
      created: !live,
      firstSecret: stored.handler.type === "http" && !wasHttp,
      record: { name, version, updatedAt, deleted: false, definition: stored },
    };
  }

  /**
   * Rotate a live HTTP tool's signing secret: the next generation signs its new calls (the definition is stamped with
   * it, so the catalog version moves and sessions capture it), and the one before verifies late results until
   * `previousUntil`.
   */
  rotateToolSecret(name: string, previousUntil: number): RotateToolSecretOutcome {
    const sql = this.ctx.storage.sql;
    const current = toolRow(sql, name);
    if (current === undefined || current.deleted || current.definition === undefined) return { type: "not_found" };
    if (current.definition.handler.type !== "http") return { type: "not_http" };
    const generation = secretGenerations(sql, name).current + 1;
    sql.exec(
      `INSERT INTO tool_secrets (name, generation, previous_until) VALUES (?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET generation = excluded.generation, previous_until = excluded.previous_until`,
      name,
      generation,
      previousUntil,
    );
    const version = bumpCatalog(sql);
    const definition = withGeneration(current.definition, generation);
    sql.exec(
      "UPDATE tools SET version = ?, definition = ?, updated_at = ? WHERE name = ?",
      version,
      JSON.stringify(definition),
      Date.now(),
      name,
    );
    return { type: "rotated", version, generation, previousUntil };
  }

  /** The generations of a tool's secret a late result may be signed with (a tombstone's too: its calls may wait). */
  toolSecretGenerations(name: string): SecretGenerations {
    return secretGenerations(this.ctx.storage.sql, name);
  }

  /** A live tool (a tombstone is not found). */
  getTool(name: string): CatalogRecord | undefined {
    const row = toolRow(this.ctx.storage.sql, name);
    return row === undefined || row.deleted ? undefined : row;
  }

  /** The live tools by name, and the catalog version. */
  listTools(): { readonly version: number; readonly items: readonly CatalogRecord[] } {
    const sql = this.ctx.storage.sql;
    const rows = sql
      .exec("SELECT name, version, deleted, definition, updated_at FROM tools WHERE deleted = 0 ORDER BY name")
      .toArray();
    return { version: catalogVersion(sql), items: rows.map(toolRecord) };
  }

  /** Delete a live tool: its row stays as a tombstone (still selectable; a later PUT revives it). */
  deleteTool(name: string, ifMatch?: IfMatch): DeleteToolOutcome {
    const sql = this.ctx.storage.sql;
    const current = toolRow(sql, name);
    if (current === undefined || current.deleted) return { type: "not_found" };
    if (ifMatch !== undefined && !matches(current, ifMatch)) return { type: "precondition", current: current.version };
    const version = bumpCatalog(sql);
    sql.exec(
      "UPDATE tools SET version = ?, deleted = 1, definition = NULL, updated_at = ? WHERE name = ?",
      version,
      Date.now(),
      name,
    );
    return { type: "deleted", name, version };
  }

  /**
   * What a session's catalog copy reads: the version, and every record (tombstones too; the MCP servers'
   * tools after the catalog's own) only when the version is not `since` (an unchanged catalog costs this
   * one small answer).
   */
  catalog(since?: number): CatalogSnapshot {
    const sql = this.ctx.storage.sql;
    const version = catalogVersion(sql);
    if (since === version) return { version };
    const rows = sql.exec("SELECT name, version, deleted, definition, updated_at FROM tools ORDER BY name").toArray();
    return { version, records: [...rows.map(toolRecord), ...this.#mcp.records()] };
  }

  // The tenant's MCP servers (docs/mcp.md; directory/mcp.ts) -----------------------------------------

  #mcpStore: McpServerStore | undefined;

  get #mcp(): McpServerStore {
    this.#mcpStore ??= new McpServerStore(this.ctx.storage.sql, () => bumpCatalog(this.ctx.storage.sql));
    return this.#mcpStore;
  }

  putMcpServer(input: McpServerWrite): ReturnType<McpServerStore["put"]> {
    return this.#mcp.put(input, Date.now());
  }

  getMcpServer(name: string): McpServerRecord | undefined {
    return this.#mcp.get(name);
  }

  listMcpServers(): McpServerRecord[] {
    return this.#mcp.list();
  }

  deleteMcpServer(name: string): ReturnType<McpServerStore["delete"]> {
    return this.#mcp.delete(name, Date.now());
  }

  refreshMcpServer(name: string, revision: number, list: McpSnapshotWrite): ReturnType<McpServerStore["refresh"]> {
    return this.#mcp.refresh(name, revision, list, Date.now());
  }

  mcpServerSecrets(name: string): ReturnType<McpServerStore["secrets"]> {
    return this.#mcp.secrets(name);
  }
}

/** The typed RPC view of a tenant's directory. */
export function directoryStub(env: Env, tenant: string): DirectoryRpc {
  const namespace = env.DIRECTORY;
  return namespace.get(namespace.idFromName(tenant)) as unknown as DirectoryRpc;
}
