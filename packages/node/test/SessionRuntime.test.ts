import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { type Approvals, Stop } from "@musekit/core"
import { inputs, routed, Scripted, scriptedModel } from "@musekit/core/testing"
import { Effect, Option } from "effect"
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

  it("the task is recorded in the write that creates the session; a large one goes to the blob store", async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "muse-rt-"))
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "muse-rt-state-"))
    // 3 MiB of task text: each event holds a reference, the model gets it whole
    const task = `Summarize this log:\n${"line of a very long build log ✓\n".repeat(100_000)}`
    const sm = scriptedModel([routed({ main: (c) => Scripted.text(`read ${c.lastUser.length} characters`) })])
    const config = SessionRuntime.config({ root, model: "scripted/test", crew: false, title: "summarize" })
    const file = path.join(dir, "sessions", "big.jsonl")
    let firstWrite: Array<string> | undefined
    const outcome = await Effect.runPromise(
      SessionRuntime.start({
        config,
        session: "big",
        dir,
        task,
        io: {
          input: Effect.sync(() => Option.none()),
          prompter: { ask: () => Effect.die("no question expected") },
          // the first event any observer sees is already on disk together with the task
          onEvent: () =>
            Effect.sync(() => {
              firstWrite ??= fs.readFileSync(file, "utf8").split("\n").filter(Boolean)
            })
        },
        services: { languageModel: sm.layer }
      })
    )
    expect(firstWrite!.map((l) => JSON.parse(l).type)).toEqual(["session.started", "user.input"])
    expect(outcome.turns[0]!.text).toBe(`read ${task.trim().length} characters`)
    const size = fs.statSync(file).size
    expect(size).toBeLessThan(64 * 1024)
    const events = await Effect.runPromise(EventLogFile.readSession("big", { dir }))
    const input = events.find((e) => e.type === "user.input")!.data as { blob: string; bytes: number; preview: string }
    expect(input.bytes).toBe(Buffer.byteLength(task))
    expect(task.startsWith(input.preview)).toBe(true)
    const blob = fs.readFileSync(path.join(dir, "blobs", input.blob.slice(0, 2), input.blob), "utf8")
    expect(blob).toBe(task)
    // the replay reads the task back from the blob store and reproduces every event
    const report = await Effect.runPromise(SessionRuntime.replay({ session: "big", dir, verify: true }))
    expect(report.matched).toBe(events.length)
  })

  it("a stop mid-tool ends the turn with the tool settled; resume goes on with that turn; the log replays", async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "muse-rt-"))
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "muse-rt-state-"))
    const sm = () =>
      scriptedModel([
        routed({
          main: (c) =>
            c.turn === 0
              ? Scripted.toolCalls([{ id: "s1", name: "run_shell", params: { command: "sleep 30" } }])
              : Scripted.text(`after the stop: ${(c.lastResults[0]?.result as { error?: string })?.error ?? "?"}`)
        })
      ])
    const config = SessionRuntime.config({ root, model: "scripted/test", approvalMode: "auto", crew: false })
    const stop = await Effect.runPromise(Stop.make)
    const io = (events: Array<string>, stopAtTool = false): SessionRuntime.Io => ({
      input: Effect.sync(() => Option.none()),
      prompter: { ask: () => Effect.die("no question expected") },
      stop,
      onEvent: (e) =>
        Effect.gen(function* () {
          events.push(e.type)
          if (stopAtTool && e.type === "tool.started") yield* stop.request("stopped by SIGINT")
        })
    })
    const seen: Array<string> = []
    const started = Date.now()
    const first = await Effect.runPromise(
      SessionRuntime.start({
        config,
        session: "s",
        dir,
        task: "wait",
        io: io(seen, true),
        services: { languageModel: sm().layer }
      })
    )
    expect(Date.now() - started).toBeLessThan(20_000)
    expect(first.turns[0]).toMatchObject({ status: "interrupted", reason: "stopped by SIGINT" })
    const log1 = await Effect.runPromise(EventLogFile.readSession("s", { dir }))
    expect(log1.slice(-2).map((e) => e.type)).toEqual(["tool.completed", "turn.interrupted"])
    expect((log1.at(-2)!.data as any).result.error).toContain("interrupted (stopped by SIGINT) while run_shell")
    // no process left behind: the lock is gone
    expect(fs.existsSync(path.join(dir, "sessions", "s.lock"))).toBe(false)

    const again: Array<string> = []
    const resumed = await Effect.runPromise(
      SessionRuntime.resume({ session: "s", dir, io: io(again), services: { languageModel: sm().layer } })
    )
    expect(resumed.turns.at(-1)).toMatchObject({ status: "completed" })
    expect(resumed.turns.at(-1)!.text).toContain("after the stop: interrupted (stopped by SIGINT)")
    const log2 = await Effect.runPromise(EventLogFile.readSession("s", { dir }))
    expect(log2.slice(log1.length).map((e) => e.type)).toEqual([
      "turn.resumed",
      "model.requested",
      "model.responded",
      "turn.completed"
    ])
    // resuming again finds nothing left to do, and the whole log replays
    const third = await Effect.runPromise(
      SessionRuntime.resume({ session: "s", dir, io: io([]), services: { languageModel: sm().layer } })
    )
    expect((await Effect.runPromise(EventLogFile.readSession("s", { dir }))).length).toBe(log2.length)
    expect(third.turns.at(-1)!.status).toBe("completed")
    const report = await Effect.runPromise(SessionRuntime.replay({ session: "s", dir, verify: true }))
    expect(report.matched).toBe(log2.length)
  })
})
