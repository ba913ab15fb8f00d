import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { Approvals } from "@musekit/core"
import { inputs, routed, Scripted, scriptedModel } from "@musekit/core/testing"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { EventLogFile, SessionRuntime } from "../src/index.js"

const model = () =>
  scriptedModel([
    routed({
      main: (c) =>
        c.lastResults.length > 0
          ? Scripted.text(`exit ${(c.lastResults[0]!.result as { exit_code?: number }).exit_code}`)
          : Scripted.toolCalls([{ name: "run_shell", params: { command: "echo hello" } }])
    })
  ]).layer

const run = (root: string, dir: string, session: string, answer: Approvals.Answer, asked: Array<string>) =>
  Effect.gen(function* () {
    const rules = yield* SessionRuntime.loadProjectRules(root)
    const config = SessionRuntime.config({ root, model: "scripted/test", approvalMode: "ask", rules, crew: false })
    return yield* SessionRuntime.start({
      config,
      session,
      dir,
      io: {
        input: inputs(["say hello"]),
        prompter: {
          ask: (r) =>
            Effect.sync(() => {
              asked.push(r.summary)
              // a session/always answer confirms the rule the question proposed
              return answer.scope === "once" ? answer : { ...answer, rule: r.proposal }
            })
        }
      },
      services: { languageModel: model() }
    })
  })

describe("SessionRuntime", () => {
  it("an answer with project scope is saved to .muse/permissions.json, and the next session does not ask", async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "muse-rt-"))
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "muse-rt-state-"))
    const asked: Array<string> = []
    const first = await Effect.runPromise(run(root, dir, "one", { allow: true, scope: "project" }, asked))
    expect(first.turns[0]!.text).toBe("exit 0")
    expect(asked).toEqual(["echo hello"])
    const saved = JSON.parse(fs.readFileSync(path.join(root, ".muse", "permissions.json"), "utf8"))
    expect(saved).toEqual({ rules: [{ tool: "run_shell", pattern: "echo hello", action: "allow", scope: "project" }] })

    const second = await Effect.runPromise(run(root, dir, "two", { allow: false, scope: "once" }, asked))
    expect(second.turns[0]!.text).toBe("exit 0")
    expect(asked).toEqual(["echo hello"]) // not asked again
    const events = await Effect.runPromise(EventLogFile.readSession("two", { dir }))
    const decided = events.find((e) => e.type === "approval.decided")!
    expect(decided.data).toMatchObject({ allow: true, by: "rule", rule: 'allow run_shell "echo hello" (project)' })
    // the rules the session ran with are part of its recorded config, so it replays the same
    const report = await Effect.runPromise(SessionRuntime.replay({ session: "two", dir, verify: true }))
    expect(report.matched).toBe(events.length)
  })

  it("a broken permissions file is a clear error naming the file", async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "muse-rt-"))
    fs.mkdirSync(path.join(root, ".muse"))
    fs.writeFileSync(path.join(root, ".muse", "permissions.json"), '{ "rules": [ { "tool": 3 } ] }')
    const err = await Effect.runPromise(Effect.flip(SessionRuntime.loadProjectRules(root)))
    expect(err._tag).toBe("ConfigError")
    expect(err.message).toContain(path.join(root, ".muse", "permissions.json"))
    fs.writeFileSync(path.join(root, ".muse", "permissions.json"), "{ not json")
    const err2 = await Effect.runPromise(Effect.flip(SessionRuntime.loadProjectRules(root)))
    expect(err2.message).toContain("is not valid JSON")
  })
})
