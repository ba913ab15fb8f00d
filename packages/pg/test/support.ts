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

/** Bundle a fixture (and the source it imports) into one ES module with esbuild, which comes with tsx. */
export const bundle = async (entry: string, outDir: string): Promise<string> => {
  const { createRequire } = await import("node:module")
  const path = await import("node:path")
  const { fileURLToPath } = await import("node:url")
  const repoRoot = fileURLToPath(new URL("../../../", import.meta.url))
  const fromTsx = createRequire(createRequire(import.meta.url).resolve("tsx/package.json"))
  const esbuild = fromTsx("esbuild") as { build: (o: Record<string, unknown>) => Promise<unknown> }
  const outfile = path.join(outDir, `${path.basename(entry, ".ts")}.mjs`)
  await esbuild.build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    tsconfig: path.join(repoRoot, "tsconfig.json"),
    banner: { js: 'import { createRequire as __cr } from "node:module"; const require = __cr(import.meta.url);' },
    logLevel: "error"
  })
  return outfile
}
