import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, it } from "@effect/vitest"
import { EventLogConformance } from "@musekit/core/testing"
import { EventLogPg } from "@musekit/pg"
import { TestPostgres } from "@musekit/pg/testing"
import { Effect } from "effect"
import { dropSchema } from "./support.js"

const { skip } = TestPostgres.decide()
let server: TestPostgres.Server | undefined

/** Every case in a schema of its own; "another" store has connections of its own, like another process. */
const postgres: EventLogConformance.Harness = {
  name: "postgres",
  fresh: (options) =>
    Effect.gen(function* () {
      const url = server!.url
      const schema = `c_${randomBytes(6).toString("hex")}`
      yield* Effect.addFinalizer(() => dropSchema(url, schema))
      const open = EventLogPg.storeAt(url, { schema, redactor: options?.redactor, maxConnections: 4 })
      return { store: yield* open, another: open }
    })
}

describe.skipIf(skip !== undefined)(`EventLog conformance: Postgres store${skip ? ` (skipped: ${skip})` : ""}`, () => {
  beforeAll(async () => {
    server = await TestPostgres.start()
  }, 120_000)
  afterAll(() => server?.stop())
  for (const c of EventLogConformance.cases) it.scoped(c.name, () => c.run(postgres))
})
