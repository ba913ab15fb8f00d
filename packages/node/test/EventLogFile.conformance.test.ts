import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, it } from "@effect/vitest"
import { EventLogConformance } from "@musekit/core/testing"
import { Effect } from "effect"
import { EventLogFile } from "../src/index.js"

/** A fresh state directory per case; "another" store is a second store over the same directory. */
const file: EventLogConformance.Harness = {
  name: "file",
  fresh: (options) =>
    Effect.map(
      Effect.acquireRelease(
        Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "muse-conformance-"))),
        (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
      ),
      (dir) => ({
        store: EventLogFile.makeStore({ dir, redactor: options?.redactor }),
        another: Effect.sync(() => EventLogFile.makeStore({ dir, redactor: options?.redactor }))
      })
    )
}

describe("EventLog conformance: file store", () => {
  for (const c of EventLogConformance.cases) it.scoped(c.name, () => c.run(file))
})
