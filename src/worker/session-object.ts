import { DurableObject } from "cloudflare:workers";

export class SessionObject extends DurableObject {
  ping(): number {
    return this.ctx.storage.sql.exec("select 1 as one").one()["one"] as number;
  }
}
