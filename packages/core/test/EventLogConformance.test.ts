import { describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { EventLog } from "../src/index.js"
import { EventLogConformance } from "../src/testing.js"

const memory: EventLogConformance.Harness = {
  name: "memory",
  fresh: (options) =>
    Effect.sync(() => {
      const store = EventLog.makeMemoryStore(options)
      return { store, another: Effect.succeed(store) }
    })
}

describe("EventLog conformance: memory store", () => {
  for (const c of EventLogConformance.cases) it.scoped(c.name, () => c.run(memory))
})
