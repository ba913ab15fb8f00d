import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { EventLogFile } from "@musekit/node"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { runAgent } from "../src/agent.js"
import { demoModel, makeDemoRepo } from "../src/demo.js"

describe("examples/custom-agent", () => {
  it("fixes the demo repository and records the session", async () => {
    const dir = makeDemoRepo()
    const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "muse-example-"))
    let text = ""
    const result = await runAgent({
      task: "The unit test fails. Fix it.",
      dir,
      model: "scripted/demo",
      languageModel: demoModel(),
      stateDir,
      onText: (d) => {
        text += d
      }
    })
    expect(result.status).toBe("completed")
    expect(text).toContain("Fixed sum.js; npm test passes.")
    expect(fs.readFileSync(path.join(dir, "sum.js"), "utf8")).toBe("export const sum = (a, b) => a + b\n")
    const events = await Effect.runPromise(EventLogFile.readSession(result.session, { dir: stateDir }))
    expect(events.filter((e) => e.type === "tool.completed").map((e) => (e.data as { tool: string }).tool)).toEqual([
      "read_file",
      "edit_file",
      "run_shell"
    ])
  })
})
