import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import { Event, EventLog, Model, Session } from "@musekit/core"
import { Scripted, scriptedModel } from "@musekit/core/testing"
import { EventLogFile } from "@musekit/node"
import { Effect, Either, Option } from "effect"
import { Goal } from "../src/index.js"
import { calcRepo, GOAL, goalScript } from "./fixtures/goalScript.js"
import { byRole, data, ofType, read, recordLive, type Seen, skillProgram, tempRepo } from "./helpers.js"

const root = fileURLToPath(new URL("../../../", import.meta.url))
const checkRuns = (repo: string) => (read(repo, "checks.log") ?? "").split("\n").filter((l) => l === "run").length

describe("/goal", () => {
  it.scoped('/goal --check "npm test" loops until the test passes', () =>
    Effect.gen(function* () {
      const repo = yield* tempRepo(calcRepo)
      const output: Array<string> = []
      const { result, events } = yield* recordLive(
        skillProgram({ repo, languageModel: scriptedModel([goalScript()]).layer, inputs: [GOAL], output })
      )
      expect(result[0]).toMatchObject({ goal: "goal-1", status: "achieved", attempts: 2 })
      expect(read(repo, "src/add.js")).toBe("export const add = (a, b) => a + b\n")

      expect(data(ofType(events, "goal.started")[0])).toMatchObject({
        goal: "goal-1",
        objective: "make the tests pass",
        check: { kind: "command", command: "npm test" },
        budget: { attempts: 10, turns: 200, tokens: null, timeMs: null }
      })
      // a check before the first attempt and after each one; each a recorded step
      const checks = ofType(events, "goal.check.completed")
      expect(checks.map((e) => [data(e).attempt, data(e).exitCode, data(e).passed])).toEqual([
        [0, 1, false],
        [1, 1, false],
        [2, 0, true]
      ])
      for (const c of checks) {
        const started = events.find((e) => e.id === c.parent)!
        expect(started.type).toBe("goal.check.started")
        expect(data(started)).toMatchObject({ attempt: data(c).attempt, command: "npm test" })
      }
      expect(data(checks[0]).output).toContain("add(2, 3) returned -1, expected 5")
      expect(data(checks[1]).output).toContain("add(2, 3) returned 6, expected 5")
      expect(checkRuns(repo)).toBe(3)

      // each attempt is a turn of the main agent told how the last check went
      const attempts = events.filter((e) => e.type === "user.message" && e.agent === "main")
      expect(attempts).toHaveLength(2)
      expect(data(attempts[0]).content[0].text).toMatch(/^<pinned>\nGoal \(goal-1\): make the tests pass/)
      expect(data(attempts[0]).content[0].options).toEqual({ muse: { pin: "goal" } })
      expect(data(attempts[0]).text).toContain("returned -1, expected 5")
      expect(data(attempts[1]).text).toContain("Attempt 2 of the goal")
      expect(data(attempts[1]).text).toContain("returned 6, expected 5")

      const done = data(ofType(events, "goal.completed")[0])
      expect(done).toMatchObject({
        goal: "goal-1",
        status: "achieved",
        attempts: 2,
        reason: "`npm test` passes",
        turns: 4
      })
      // check-ins after each attempt, and a clear final result
      expect(output.some((o) => o.startsWith("Goal goal-1, attempt 1: `npm test` fails (exit 1)."))).toBe(true)
      expect(output.at(-1)).toMatch(/^Goal achieved after 2 attempt\(s\): `npm test` passes\. \(4 model calls/)
      expect(Goal.fromEvents(events).pipe(Option.map((g) => [g.status, g.attempts]))).toEqual(
        Option.some(["achieved", 2])
      )

      // replay serves the checks from the log: the test does not run again
      const report = yield* Session.replay(
        skillProgram({ repo, languageModel: Model.layerLanguageModelForbidden, inputs: [GOAL] }),
        { events, verify: true }
      )
      expect(report.matched).toBe(events.length)
      expect(checkRuns(repo)).toBe(3)
    })
  )

  it.scoped("a goal whose budget runs out stops with a clear report", () =>
    Effect.gen(function* () {
      const repo = yield* tempRepo(calcRepo)
      const output: Array<string> = []
      const { result, events } = yield* recordLive(
        skillProgram({
          repo,
          languageModel: scriptedModel([goalScript({ stubborn: true })]).layer,
          inputs: [`${GOAL} --max-turns 3`],
          output
        })
      )
      expect(result[0]).toMatchObject({ status: "budget", attempts: 2 })
      const done = data(ofType(events, "goal.completed")[0])
      expect(done).toMatchObject({
        status: "budget",
        attempts: 2,
        turns: 3,
        reason: "the budget of 3 model calls is used up after 2 attempt(s); `npm test` fails (exit 1)"
      })
      // the second attempt was cut off by the turn budget
      expect(ofType(events, "goal.attempt.completed").map((e) => data(e).status)).toEqual(["completed", "budget"])
      expect(events.filter((e) => e.type === "model.requested" && e.agent === "main")).toHaveLength(3)
      expect(output.at(-1)).toMatch(
        /^Goal stopped, budget exhausted: the budget of 3 model calls is used up after 2 attempt\(s\); `npm test` fails \(exit 1\)\./
      )
    })
  )

  it.scoped("without --check a judge decides, and its verdict and reasoning are recorded", () =>
    Effect.gen(function* () {
      const repo = yield* tempRepo({ "README.md": "# calc\n" })
      const judge = (s: Seen) => {
        if (s.lastResults.some((r) => r.name === "submit_verdict")) return Scripted.text("Verdict given.")
        if (s.lastResults.length === 0) {
          return Scripted.toolCalls([{ id: "look", name: "read_file", params: { path: "CHANGELOG.md" } }])
        }
        const found = s.lastResults[0]!.isFailure ? "" : JSON.stringify(s.lastResults[0]!.result)
        const met = found.includes("## 1.0.0")
        return Scripted.toolCalls([
          {
            id: "verdict",
            name: "submit_verdict",
            params: {
              verdict: met ? "met" : "not-met",
              reasoning: met ? "CHANGELOG.md has a 1.0.0 section." : "CHANGELOG.md has no 1.0.0 section yet."
            }
          }
        ])
      }
      const main = (s: Seen) => {
        if (s.lastResults.length > 0) return Scripted.text("Done.")
        const attempt = /Attempt (\d+) of the goal/.exec(s.lastUser)?.[1]
        const content = attempt === "1" ? "# Changelog\n" : "# Changelog\n\n## 1.0.0\n\n- First release\n"
        return Scripted.toolCalls([
          { id: `w${attempt}`, name: "write_file", params: { path: "CHANGELOG.md", content } }
        ])
      }
      const output: Array<string> = []
      const { result, events } = yield* recordLive(
        skillProgram({
          repo,
          languageModel: scriptedModel([byRole({ main, judge })]).layer,
          inputs: ['/goal write a changelog --judge "CHANGELOG.md has a section for 1.0.0"'],
          output
        })
      )
      expect(result[0]).toMatchObject({ status: "achieved", attempts: 2 })
      const checks = ofType(events, "goal.check.completed")
      expect(checks.map((e) => [data(e).kind, data(e).verdict, data(e).reasoning])).toEqual([
        ["judged", "not-met", "CHANGELOG.md has no 1.0.0 section yet."],
        ["judged", "met", "CHANGELOG.md has a 1.0.0 section."]
      ])
      expect(data(checks[0]).judge).toBe("goal-judge")
      expect(events.some((e) => e.agent === "goal-judge" && e.type === "model.responded")).toBe(true)
      expect(data(ofType(events, "goal.check.started")[0])).toMatchObject({
        kind: "judged",
        criterion: "CHANGELOG.md has a section for 1.0.0"
      })
      // the agent hears the judge's reasoning in its next attempt
      const second = events.filter((e) => e.type === "user.message" && e.agent === "main")[1]!
      expect(data(second).text).toContain(
        "The judge says the goal is not met yet: CHANGELOG.md has no 1.0.0 section yet."
      )
      expect(output.at(-1)).toMatch(/^Goal achieved after 2 attempt\(s\): the judge says the goal is met\./)
    })
  )

  it.scoped("SIGKILL mid-goal, then resume: the same goal continues and finishes without repeating attempts", () =>
    Effect.gen(function* () {
      const repo = yield* tempRepo(calcRepo)
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "muse-goal-state-"))),
        (d) => Effect.sync(() => fs.rmSync(d, { recursive: true, force: true }))
      )
      const session = "goal-kill"

      // 1. the goal runs in a child process on the durable file log; kill it after attempt 1's check
      const killedAt = yield* Effect.async<ReadonlyArray<Event.Envelope>, Error>((resume) => {
        const child = spawn(
          process.execPath,
          ["--import", "tsx", path.join(root, "plugins/skills/test/fixtures/goal-child.ts"), repo, dir, session],
          { cwd: root, env: { ...process.env, TSX_TSCONFIG_PATH: path.join(root, "tsconfig.json") }, stdio: "pipe" }
        )
        let stderr = ""
        child.stderr.on("data", (b) => (stderr += String(b)))
        let seen: ReadonlyArray<Event.Envelope> = []
        const poll = setInterval(() => {
          const events = Effect.runSync(
            EventLogFile.readSession(session, { dir }).pipe(Effect.orElseSucceed(() => [] as ReadonlyArray<never>))
          )
          if (events.some((e) => e.type === "goal.check.completed" && data(e).attempt === 1)) {
            clearInterval(poll)
            seen = events
            child.kill("SIGKILL")
          }
        }, 25)
        child.on("exit", (code, signal) => {
          clearInterval(poll)
          if (signal === "SIGKILL") resume(Effect.succeed(seen))
          else resume(Effect.fail(new Error(`the child exited by itself (code ${code}): ${stderr}`)))
        })
        return Effect.sync(() => {
          clearInterval(poll)
          child.kill("SIGKILL")
        })
      })
      const before = Effect.runSync(EventLogFile.readSession(session, { dir }))
      expect(before.length).toBe(killedAt.length)
      expect(ofType(before, "goal.completed")).toEqual([])
      // the kill lands at or after attempt 1's check (the child goes on while the log is polled)
      expect(before.some((e) => e.type === "goal.check.completed" && data(e).attempt === 1)).toBe(true)
      const checksBefore = checkRuns(repo)
      expect(checksBefore).toBeGreaterThanOrEqual(2) // before the first attempt, and after it
      // a check cut short by the kill is run again on resume
      const checkInFlight = before.at(-1)!.type === "goal.check.started" ? 1 : 0

      // 2. resume in this process: replay up to the kill, then live
      const model = scriptedModel([goalScript()])
      const output: Array<string> = []
      const resumed = yield* Effect.scoped(
        Effect.gen(function* () {
          const log = yield* EventLogFile.open(session, { dir })
          const result = yield* Session.resume(
            skillProgram({ repo, languageModel: model.layer, inputs: [GOAL], output })
          ).pipe(Effect.provideService(EventLog.EventLog, log))
          return { result, events: yield* EventLog.readAll(log) }
        })
      )
      const after = resumed.events
      expect(resumed.result[0]).toMatchObject({ goal: "goal-1", status: "achieved", attempts: 2 })
      expect(read(repo, "src/add.js")).toBe("export const add = (a, b) => a + b\n")

      // the log before the kill is untouched; the same goal went on
      expect(after.slice(0, before.length).map(Event.encodeLine)).toEqual(before.map(Event.encodeLine))
      expect(ofType(after, "goal.started")).toHaveLength(1)
      expect(ofType(after, "goal.attempt.started").map((e) => data(e).attempt)).toEqual([1, 2])
      expect(data(ofType(after, "goal.completed")[0])).toMatchObject({ status: "achieved", attempts: 2 })

      // nothing before the kill ran again: one model call per recorded request after it, no check twice
      const liveRequests = after.filter((e) => e.seq >= before.length && e.type === "model.requested")
      expect(model.calls()).toBe(liveRequests.length)
      expect(ofType(after, "goal.check.completed").map((e) => data(e).attempt)).toEqual([0, 1, 2])
      expect(checkRuns(repo)).toBe(3 + checkInFlight)
      expect(output.at(-1)).toMatch(/^Goal achieved after 2 attempt\(s\)/)

      // and the whole two-process session replays exactly
      const report = yield* Session.replay(
        skillProgram({ repo, languageModel: Model.layerLanguageModelForbidden, inputs: [GOAL] }),
        { events: after, verify: true }
      )
      expect(report.matched).toBe(after.length)
    })
  )
})

describe("Goal.parseArgs", () => {
  it("reads the objective, the check and the budget flags", () => {
    expect(
      Goal.parseArgs(
        'fix "the" build --check "npm run build && npm test" --max-turns 40 --max-tokens 1.5M --max-time=1h30m'
      )
    ).toEqual(
      Either.right({
        objective: 'fix "the" build',
        check: "npm run build && npm test",
        criterion: undefined,
        maxAttempts: undefined,
        maxTurns: 40,
        maxTokens: 1_500_000,
        maxTimeMs: 5_400_000
      })
    )
  })

  it("explains what is wrong", () => {
    expect(Goal.parseArgs('--check "npm test"')).toEqual(Either.left(`give an objective. Usage: ${Goal.usage}`))
    expect(Goal.parseArgs("x --max-turns lots")).toEqual(Either.left('--max-turns needs a positive number, got "lots"'))
    expect(Goal.parseArgs("x --max-time soon")).toEqual(
      Either.left('--max-time needs a duration like 90s, 30m, 2h or 1h30m, got "soon"')
    )
    expect(Goal.parseArgs('x --check "npm test')).toEqual(Either.left('unterminated " quote starting at "npm test…'))
    expect(Either.getLeft(Goal.parseArgs("x --retries 3")).pipe(Option.getOrThrow)).toContain(
      "unknown option --retries"
    )
  })
})
