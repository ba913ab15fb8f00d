import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Prompt } from "@effect/ai"
import { EventLogFile, SessionRuntime } from "@musekit/node"
import { Effect, Option } from "effect"
import { describe, expect, it } from "vitest"
import * as Plugins from "../src/internal/plugins.js"
import * as Scripted from "../src/internal/scripted.js"
import * as Tools from "../src/internal/tools.js"

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), "muse-cli-session-"))

const runSession = (inputs: ReadonlyArray<string>, script: Scripted.Script) =>
  Effect.gen(function* () {
    const root = tmp()
    const dir = tmp()
    fs.writeFileSync(path.join(root, "notes.txt"), `${"a line of notes that the agent reads\n".repeat(400)}`)
    const queue = [...inputs]
    const plugins = yield* Plugins.make({ root, projectSkills: true, userDir: null })
    const config = SessionRuntime.config({ root, model: "scripted/test", crew: false, approvalMode: "auto" })
    const outputs: Array<string> = []
    yield* SessionRuntime.start({
      config,
      session: "s",
      dir,
      io: {
        input: Effect.sync(() => Option.fromNullable(queue.shift())),
        prompter: { ask: () => Effect.succeed({ allow: true, scope: "once" }) },
        output: (t) => Effect.sync(() => void outputs.push(t))
      },
      services: { languageModel: Scripted.layer(script), plugins: plugins.plugins, tools: Tools.make([]) }
    }) as Effect.Effect<unknown, unknown>
    const events = yield* EventLogFile.readSession("s", { dir })
    return { events, dir, plugins, outputs }
  })

describe("the session as muse runs it", () => {
  it("/compact is recorded as input, compacts the main agent before its next model call, and replays", async () => {
    const script: Scripted.Script = {
      replies: [
        {
          when: "read the notes",
          steps: [{ tools: [{ name: "read_file", params: { path: "notes.txt" } }] }, { text: "I read them." }]
        },
        { when: "second", steps: [{ text: "Second answer." }] },
        { steps: [{ text: "## Goal\nRead notes.\n## Progress\nRead notes.txt." }] }
      ]
    }
    const { events, dir, plugins, outputs } = await Effect.runPromise(
      runSession(["read the notes", "/compact", "second question", "third question"], script)
    )
    expect(outputs).toContain("The context of main will be compacted before its next model call.")
    const types = events.map((e) => `${e.agent}:${e.type}`)
    const compacted = events.filter((e) => e.type === "context.compacted")
    expect(compacted).toHaveLength(1)
    expect((compacted[0]!.data as any).force).toBe(true)
    // it happened in the turn after /compact, before that turn's main model request
    const second = events.findIndex((e) => e.type === "user.input" && (e.data as any).text === "second question")
    const at = events.indexOf(compacted[0]!)
    expect(at).toBeGreaterThan(second)
    expect(types.slice(at).find((t) => t === "main:model.requested")).toBeDefined()
    expect(types.indexOf("main:model.requested", second)).toBeGreaterThan(at)
    // the third question did not compact again
    const third = events.findIndex((e) => e.type === "user.input" && (e.data as any).text === "third question")
    expect(third).toBeGreaterThan(at)

    const report = await Effect.runPromise(
      Tools.replay({
        session: "s",
        store: EventLogFile.makeStore({ dir }),
        events,
        verify: true,
        plugins: plugins.plugins
      }) as Effect.Effect<any, unknown>
    )
    expect(report.matched).toBe(events.length)
  })

  it("a small context is not compacted", async () => {
    const { events } = await Effect.runPromise(runSession(["hello"], { steps: [{ text: "Hi." }] }))
    expect(events.some((e) => e.type === "context.compacted")).toBe(false)
  })
})

describe("the scripted model", () => {
  const prompt = (messages: ReadonlyArray<Prompt.MessageEncoded>) =>
    Prompt.make([{ role: "system", content: "You are muse." }, ...messages] as any)
  const script: Scripted.Script = {
    replies: [
      {
        when: "fix",
        steps: [{ text: "step 1", tools: [{ name: "read_file", params: { path: "a" } }] }, { text: "step 2" }]
      },
      { when: "crew reports", steps: [{ text: "noted" }] },
      { steps: [{ text: "default" }] }
    ]
  }
  const call = (id: string) =>
    ({ type: "tool-call", id, name: "read_file", params: { path: "a" }, providerExecuted: false }) as const
  const result = (id: string) =>
    ({
      role: "tool",
      content: [{ type: "tool-result", id, name: "read_file", isFailure: false, result: "x", providerExecuted: false }]
    }) as const

  it("counts steps from the message that matched and keeps a task's steps when a report arrives mid-task", () => {
    expect(Scripted.choose(script, prompt([{ role: "user", content: "please fix it" }])).step.text).toBe("step 1")
    const midTask = prompt([
      { role: "user", content: "please fix it" },
      { role: "assistant", content: [call("c1")] },
      result("c1"),
      { role: "user", content: "Crew reports: done" }
    ])
    expect(Scripted.choose(script, midTask).step.text).toBe("step 2")
    const afterTask = prompt([
      { role: "user", content: "please fix it" },
      { role: "assistant", content: [call("c1")] },
      result("c1"),
      { role: "assistant", content: "step 2" },
      { role: "user", content: "Crew reports: done" }
    ])
    expect(Scripted.choose(script, afterTask).step.text).toBe("noted")
  })

  it("a new turn retires the entry of an interrupted one", () => {
    const p = prompt([
      { role: "user", content: "please fix it" },
      { role: "user", content: "something else" }
    ])
    expect(Scripted.choose(script, p).step.text).toBe("default")
  })
})
