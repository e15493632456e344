/**
 * A session's copy of its tenant's tool catalog (docs/tools.md "How a session learns the catalog"):
 * the `ToolCatalog` the turn kinds read (src/kinds/catalog-types.ts), answered from memory.
 *
 * The copy is `{ version, fetchedAt, records }` in memory only (a new instance starts empty). `refresh`
 * reads the tenant's DirectoryObject only when the copy is older than `catalogTtlMs()` (30 s unless a
 * test sets the seam), or when forced, and asks `catalog(version)`: an unchanged catalog answers its
 * version alone. A failed read is reported and the copy kept; nothing here throws. The turn kinds call
 * `refresh` only when the selection names a tool that is not built in, and the selection checks force it
 * only for a name the copy does not know, so a session of built-in tools never reads the directory.
 * The tenant comes from the session's directory link: a session created over RPC has none, so its
 * catalog stays empty.
 */
import type { CapturedTool, CatalogRecord, OfferedTool, ToolCatalog } from "../../kinds/catalog-types.js";
import type { Clock } from "../../core/host.js";
import { directoryStub, type CatalogSnapshot } from "../directory/object.js";
import type { Env } from "../env.js";
import { catalogTtlMs, hostReport } from "../platform/host-config.js";

export interface CatalogCacheDeps {
  /** The session's tenant (undefined: no catalog). */
  readonly tenant: () => string | undefined;
  /** The tenant's `catalog(since)`. */
  readonly read: (tenant: string, since: number | undefined) => Promise<CatalogSnapshot>;
  /** The host clock (its time decides the copy's age). */
  readonly clock: Clock;
  readonly ttlMs: () => number;
  readonly report: (error: unknown) => void;
}

interface Copy {
  readonly version: number;
  readonly fetchedAt: number;
  readonly records: ReadonlyMap<string, CatalogRecord>;
}

export class CatalogCache implements ToolCatalog {
  readonly #deps: CatalogCacheDeps;
  #copy: Copy | undefined;
  /** The read in flight: concurrent refreshes share it. */
  #reading: Promise<void> | undefined;

  constructor(deps: CatalogCacheDeps) {
    this.#deps = deps;
  }

  capture(name: string): CapturedTool | undefined {
    const record = this.#copy?.records.get(name);
    if (record === undefined) return undefined;
    return record.definition === undefined || record.deleted
      ? { name, version: record.version, removed: true }
      : { name, version: record.version, definition: record.definition };
  }

  offer(name: string): OfferedTool | undefined {
    const definition = this.#copy?.records.get(name)?.definition;
    return definition === undefined
      ? undefined
      : { name, description: definition.description, parameters: definition.parameters };
  }

  names(): readonly string[] {
    return [...(this.#copy?.records.keys() ?? [])];
  }

  async refresh(options: { readonly force?: boolean }): Promise<void> {
    const tenant = this.#deps.tenant();
    if (tenant === undefined) return;
    const copy = this.#copy;
    if (options.force === true) {
      // A read already in flight may have started before the change the caller wants to see.
      if (this.#reading !== undefined) await this.#reading;
    } else if (copy !== undefined && this.#deps.clock.now() - copy.fetchedAt < this.#deps.ttlMs()) {
      return;
    }
    this.#reading ??= this.#read(tenant).finally(() => {
      this.#reading = undefined;
    });
    await this.#reading;
  }

  async #read(tenant: string): Promise<void> {
    const before = this.#copy;
    try {
      const snapshot = await this.#deps.read(tenant, before?.version);
      const records =
        snapshot.records === undefined
          ? before?.records
          : new Map(snapshot.records.map((record) => [record.name, record]));
      this.#copy = { version: snapshot.version, fetchedAt: this.#deps.clock.now(), records: records ?? new Map() };
    } catch (error) {
      this.#deps.report(error);
    }
  }
}

/**
 * The names a selection may use: the built-in tools and the catalog's (live and deleted). A selection
 * naming a tool neither knows reads the catalog first (forced), so a tool defined a moment ago is
 * selectable at once; one of built-in tools only never reads it.
 */
export async function selectableTools(
  builtins: readonly string[],
  catalog: ToolCatalog | undefined,
  selected: readonly string[] = [],
): Promise<readonly string[]> {
  if (catalog === undefined) return builtins;
  const known = (name: string): boolean => builtins.includes(name) || catalog.names().includes(name);
  if (!selected.every(known)) await catalog.refresh({ force: true });
  return [...builtins, ...catalog.names()];
}

/** A session object's catalog copy: it reads its tenant's DirectoryObject (`tenant`: from the directory link). */
export function sessionCatalog(env: Env, clock: Clock, tenant: () => string | undefined): CatalogCache {
  return new CatalogCache({
    tenant,
    clock,
    read: (name, since) => directoryStub(env, name).catalog(since),
    ttlMs: catalogTtlMs,
    report: (error) => hostReport({ type: "catalog_read_failed", error }),
  });
}
