import type { SqlHost } from "../../storage/sql.js";
import { storedVersion } from "../../storage/migrations.js";

/**
 * KV flag while an import stages its lines (session/transfer.ts): the rows are no session until the import's settling
 * transaction removes it. A leftover means the import died before settling; the next import of the name wipes it.
 */
export const IMPORT_STAGING_KEY = "edge.import.staging";

/** KV: the last sequence an import brought (its inputs were metered by its source; limits/meter.ts). */
export const IMPORTED_THROUGH_KEY = "edge.import.through";

/**
 * Whether storage holds a session's rows: its schema exists and a creating commit (root conversation and
 * initial values, one atomic batch) is durable, so a conversation row exists (conversations are only
 * ever tombstoned, never removed). Reads only, so asking writes nothing.
 */
export function sessionCreated(host: SqlHost): boolean {
  if (storedVersion(host) === 0) return false;
  return host.sql.exec("SELECT 1 AS found FROM conversations LIMIT 1").toArray().length > 0;
}

/** A session's storage: its SQL, and the KV where an import's staging flag is. */
export type SessionStorage = SqlHost & { readonly kv: Pick<SyncKvStorage, "get"> };

/**
 * Whether the session was created: its rows exist (`sessionCreated`) and no import is staging them (staged rows are
 * a session only once the import's settling transaction ran).
 */
export function sessionExists(storage: SessionStorage): boolean {
  return sessionCreated(storage) && storage.kv.get(IMPORT_STAGING_KEY) === undefined;
}

/**
 * `sessionExists` for one object, remembered once true (every user request asks it, and asking costs three
 * statements). Rule: the object is the only writer of its storage, and a created session stays created until the object
 * wipes its storage (delete, an import's wipe), which calls `wiped`: so a remembered `true` is what storage says.
 */
export class CreatedCheck {
  readonly #host: SessionStorage;
  #seen = false;

  constructor(host: SessionStorage) {
    this.#host = host;
  }

  get created(): boolean {
    if (this.#seen) return true;
    this.#seen = sessionExists(this.#host);
    return this.#seen;
  }

  /** The object wiped (or may have wiped) its storage: ask storage again. */
  wiped(): void {
    this.#seen = false;
  }
}
