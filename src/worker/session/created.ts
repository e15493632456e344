import type { SqlHost } from "../../storage/sql.js";
import { storedVersion } from "../../storage/migrations.js";

/**
 * Whether the session was created: its schema exists and the creating commit (root conversation and
 * initial values, one atomic batch) is durable, so a conversation row exists (conversations are only
 * ever tombstoned, never removed). Reads only, so asking writes nothing.
 */
export function sessionCreated(host: SqlHost): boolean {
  if (storedVersion(host) === 0) return false;
  return host.sql.exec("SELECT 1 AS found FROM conversations LIMIT 1").toArray().length > 0;
}

/**
 * `sessionCreated` for one object, remembered once true (every user request asks it, and asking costs three
 * statements). Rule: the object is the only writer of its storage, and a created session stays created until the object
 * wipes its storage (delete, an import's wipe), which calls `wiped`: so a remembered `true` is what storage says.
 */
export class CreatedCheck {
  readonly #host: SqlHost;
  #seen = false;

  constructor(host: SqlHost) {
    this.#host = host;
  }

  get created(): boolean {
    if (this.#seen) return true;
    this.#seen = sessionCreated(this.#host);
    return this.#seen;
  }

  /** The object wiped (or may have wiped) its storage: ask storage again. */
  wiped(): void {
    this.#seen = false;
  }
}
