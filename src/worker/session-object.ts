import { DurableObject } from "cloudflare:workers";
import { SqliteStorage } from "../storage/sqlite.js";

export class SessionObject extends DurableObject {
  #storage: SqliteStorage | undefined;

  /**
   * The session's storage, opened on first use: migrations run then (a never-used object has no tables),
   * and a schema newer than this code refuses to open. `ctx.storage` is the `SqlHost` it runs on.
   */
  protected sessionStorage(): SqliteStorage {
    this.#storage ??= SqliteStorage.open(this.ctx.storage);
    return this.#storage;
  }

  ping(): number {
    return this.ctx.storage.sql.exec("select 1 as one").one()["one"] as number;
  }
}
