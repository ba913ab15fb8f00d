/** Helpers shared by the Postgres tests. */
import { SqlClient } from "@effect/sql"
import { EventLogPg } from "@musekit/pg"
import { Effect } from "effect"

/** Run SQL as the test server's owner. */
export const sqlAt = <A, E>(url: string, f: (sql: SqlClient.SqlClient) => Effect.Effect<A, E>) =>
  Effect.scoped(
    Effect.flatMap(SqlClient.SqlClient, f).pipe(Effect.provide(EventLogPg.layerClient(url, { maxConnections: 1 })))
  )

export const dropSchema = (url: string, schema: string) =>
  Effect.ignore(sqlAt(url, (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)))
