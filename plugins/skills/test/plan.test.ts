import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Event, Model, Session } from "@musekit/core"
import { Scripted, scriptedModel } from "@musekit/core/testing"
import { Effect, type Layer, Option } from "effect"
import { Plan } from "../src/index.js"
import * as Planning from "../src/internal/planning.js"
import {
  answering,
  byRole,
  data,
  neverAsked,
  ofType,
  read,
  recordLive,
  type Seen,
  skillProgram,
  tempRepo
} from "./helpers.js"

const step = (id: string, file: string, dependsOn: Array<string> = []) => ({
  id,
  intent: `Create ${file} with the letter ${id}`,
  files: [file],
  risks: [],
  verify: `${file} exists`,
  dependsOn
})

/** The planner looks around once, then submits; asked for changes, it adds step s3. */
const planner = (s: Seen) => {
  if (s.lastResults.some((r) => r.name === "submit_plan")) return Scripted.text("Plan submitted.")
  if (s.lastResults.length === 0) return Scripted.toolCalls([{ id: "look", name: "list_files", params: {} }])
  const steps = [step("s1", "notes/a.txt"), step("s2", "notes/b.txt", ["s1"])]
  if (s.lastUser.includes("also create notes/c.txt")) steps.push(step("s3", "notes/c.txt", ["s2"]))
  return Scripted.toolCalls([{ id: "submit", name: "submit_plan", params: { title: "Write the notes", steps } }])
}

/** The main agent carries out a step by writing the file it names; step `blocked` refuses. */
const worker =
  (blocked?: string) =>
  (s: Seen): ReturnType<typeof Scripted.text> => {
    const m = /Carry out step (\w+) .*\nCreate (\S+) with/.exec(s.lastUser)
    if (!m) return Scripted.text("nothing to do")
    const [, id, file] = m
    if (id === blocked)
      return Scripted.text(`Cannot do ${id}: the folder is read-only.\nSTEP STATUS: blocked — read-only`)
    if (s.lastResults.length > 0) return Scripted.text(`Wrote ${file}.\nSTEP STATUS: done`)
    return Scripted.toolCalls([{ id: `write-${id}`, name: "write_file", params: { path: file, content: `${id}\n` } }])
  }

const files = { "README.md": "# notes\n" }

describe("/plan", () => {
  it.scoped("an approved plan runs its steps in dependency order with progress events, and replays exactly", () =>
    Effect.gen(function* () {
      const repo = yield* tempRepo(files)
      const prompter = answering([Plan.answers.approve])
      const output: Array<string> = []
      const model = scriptedModel([byRole({ planner, main: worker() })])
      const { result, events } = yield* recordLive(
        skillProgram({
          repo,
          languageModel: model.layer,
          inputs: ["/plan write two notes"],
          prompter: prompter.layer,
          output
        })
      )
      expect(result[0]).toMatchObject({ id: "plan-1", status: "done", done: 2 })
      expect(read(repo, "notes/a.txt")).toBe("s1\n")
      expect(read(repo, "notes/b.txt")).toBe("s2\n")

      // the plan was shown, and asked about through the prompter with the plan as preview
      expect(output[0]).toContain("Plan: Write the notes (version 1)")
      expect(output[0]).toContain("1. [s1] Create notes/a.txt")
      expect(prompter.asked).toHaveLength(1)
      expect(prompter.asked[0]).toMatchObject({ agent: "main", tool: "/plan" })
      expect(prompter.asked[0]!.preview).toContain("verify: notes/b.txt exists")

      const proposed = ofType(events, "plan.proposed")[0]!
      expect(proposed.agent).toBe("main")
      expect(data(proposed).plan.steps.map((s: Plan.Step) => s.id)).toEqual(["s1", "s2"])
      const answered = ofType(events, "plan.approval.answered")[0]!
      expect(answered.parent).toBe(ofType(events, "plan.approval.requested")[0]!.id)
      expect(data(answered).decision).toBe("approve")

      // nothing of the main agent ran before the approval; the steps ran one after the other
      const mainTools = events.filter((e) => e.type === "tool.started" && e.agent === "main")
      expect(mainTools.map((e) => data(e).params.path)).toEqual(["notes/a.txt", "notes/b.txt"])
      expect(mainTools[0]!.seq).toBeGreaterThan(answered.seq)
      const progress = events
        .filter((e) => e.type.startsWith("plan.step.") || e.type === "plan.completed")
        .map((e) => `${e.type} ${data(e).step ?? data(e).status}`)
      expect(progress).toEqual([
        "plan.step.started s1",
        "plan.step.completed s1",
        "plan.step.started s2",
        "plan.step.completed s2",
        "plan.completed done"
      ])
      const started = ofType(events, "plan.step.started")
      const completed = ofType(events, "plan.step.completed")
      expect(mainTools[0]!.seq).toBeGreaterThan(started[0]!.seq)
      expect(mainTools[0]!.seq).toBeLessThan(completed[0]!.seq)
      expect(mainTools[1]!.seq).toBeGreaterThan(completed[0]!.seq)
      expect(completed.map((e) => data(e).status)).toEqual(["done", "done"])
      expect(output.some((o) => o.includes("step 2/2 [s2] done"))).toBe(true)

      // the planner is its own agent and wrote the plan through submit_plan
      const submit = events.find((e) => e.type === "tool.started" && data(e).tool === "submit_plan")!
      expect(submit.agent).toBe("planner")
      expect(submit.seq).toBeLessThan(proposed.seq)

      // the plan reaches the main agent pinned, so compaction keeps it
      const firstStep = events.find((e) => e.type === "user.message" && e.agent === "main")!
      const pinned = data(firstStep).content[0]
      expect(pinned.text.startsWith("<pinned>")).toBe(true)
      expect(pinned.text).toContain("Plan: Write the notes")
      expect(pinned.options).toEqual({ muse: { pin: "plan" } })

      expect(Plan.fromEvents(events).pipe(Option.map((s) => [s.status, s.steps]))).toEqual(
        Option.some(["done", { s1: "done", s2: "done" }])
      )

      // replay: no model, no prompter, no tool; the same events, byte for byte
      const replayed: Array<string> = []
      const report = yield* Session.replay(
        skillProgram({
          repo,
          languageModel: Model.layerLanguageModelForbidden,
          inputs: ["/plan write two notes"],
          prompter: neverAsked
        }),
        { events, verify: true, onEvent: (e) => Effect.sync(() => void replayed.push(Event.encodeLine(e))) }
      )
      expect(report).toEqual({ matched: events.length, total: events.length, endedEarly: false })
      expect(replayed).toEqual(events.map(Event.encodeLine))
    })
  )

  it.scoped("a rejected plan runs no tool", () =>
    Effect.gen(function* () {
      const repo = yield* tempRepo(files)
      const prompter = answering([Plan.answers.reject()])
      const output: Array<string> = []
      const { result, events } = yield* recordLive(
        skillProgram({
          repo,
          languageModel: scriptedModel([byRole({ planner, main: worker() })]).layer,
          inputs: ["/plan write two notes"],
          prompter: prompter.layer,
          output
        })
      )
      expect(result[0]).toMatchObject({ status: "rejected" })
      const proposed = ofType(events, "plan.proposed")[0]!
      expect(events.filter((e) => e.seq > proposed.seq && e.type === "tool.started")).toEqual([])
      expect(events.filter((e) => e.agent === "main" && e.type === "model.requested")).toEqual([])
      expect(ofType(events, "plan.step.started")).toEqual([])
      expect(data(ofType(events, "plan.approval.answered")[0])).toMatchObject({ decision: "reject", feedback: null })
      expect(data(ofType(events, "plan.completed")[0])).toMatchObject({
        status: "rejected",
        done: 0,
        reason: "rejected by the user"
      })
      expect(read(repo, "notes/a.txt")).toBeUndefined()
      expect(output.at(-1)).toContain("was not run: rejected by the user")
    })
  )

  it.scoped("an edit request revises the plan and asks again; the revised plan runs", () =>
    Effect.gen(function* () {
      const repo = yield* tempRepo(files)
      const prompter = answering([Plan.answers.edit("also create notes/c.txt"), Plan.answers.approve])
      const { events } = yield* recordLive(
        skillProgram({
          repo,
          languageModel: scriptedModel([byRole({ planner, main: worker() })]).layer,
          inputs: ["/plan write two notes"],
          prompter: prompter.layer
        })
      )
      expect(prompter.asked).toHaveLength(2)
      expect(prompter.asked[1]!.preview).toContain("Plan: Write the notes (version 2)")
      const revised = ofType(events, "plan.revised")[0]!
      expect(data(revised)).toMatchObject({
        id: "plan-1",
        version: 2,
        reason: "edit",
        feedback: "also create notes/c.txt"
      })
      expect(data(revised).plan.steps.map((s: Plan.Step) => s.id)).toEqual(["s1", "s2", "s3"])
      expect(ofType(events, "plan.approval.answered").map((e) => data(e).decision)).toEqual(["edit", "approve"])
      // no step ran before the second answer
      const approved = ofType(events, "plan.approval.answered")[1]!
      expect(ofType(events, "plan.step.started").every((e) => e.seq > approved.seq)).toBe(true)
      expect(ofType(events, "plan.step.completed").map((e) => data(e).step)).toEqual(["s1", "s2", "s3"])
      expect(read(repo, "notes/c.txt")).toBe("s3\n")
    })
  )

  it.scoped("a blocked step stops the plan; later steps do not run", () =>
    Effect.gen(function* () {
      const repo = yield* tempRepo(files)
      const { result, events } = yield* recordLive(
        skillProgram({
          repo,
          languageModel: scriptedModel([byRole({ planner, main: worker("s1") })]).layer,
          inputs: ["/plan write two notes"],
          prompter: answering([Plan.answers.approve]).layer
        })
      )
      expect(result[0]).toMatchObject({ status: "failed", done: 0 })
      expect(ofType(events, "plan.step.started").map((e) => data(e).step)).toEqual(["s1"])
      expect(data(ofType(events, "plan.step.completed")[0])).toMatchObject({ step: "s1", status: "blocked" })
      expect(data(ofType(events, "plan.completed")[0]).reason).toContain("step s1 blocked")
      expect(read(repo, "notes/b.txt")).toBeUndefined()
    })
  )
})

/**
 * A plan of three steps with verify commands: s1 edits a file that does not hold the text it
 * replaces (the edit fails, the agent says done anyway), or, with `fixed`, writes it; s2 writes
 * a file its verify command checks; s3's verify command fails.
 */
const verifyingPlanner = (s: Seen) => {
  if (s.lastResults.some((r) => r.name === "submit_plan")) return Scripted.text("Plan submitted.")
  const steps = [
    { id: "s1", intent: "Fix sum.js", files: ["sum.js"], risks: [], verify: "`grep -q 'a + b' sum.js`", dependsOn: [] },
    {
      id: "s2",
      intent: "Write notes/b.txt",
      files: ["notes/b.txt"],
      risks: [],
      verify: "test -f notes/b.txt",
      dependsOn: ["s1"]
    },
    {
      id: "s3",
      intent: "Write notes/c.txt",
      files: ["notes/c.txt"],
      risks: [],
      verify: "grep -q never notes/c.txt",
      dependsOn: ["s2"]
    }
  ]
  return Scripted.toolCalls([{ id: "submit", name: "submit_plan", params: { title: "Fix and note", steps } }])
}

const verifyingWorker =
  (oldText: string) =>
  (s: Seen): ReturnType<typeof Scripted.text> => {
    const id = /Carry out step (\w+) /.exec(s.lastUser)?.[1]
    if (s.lastResults.length > 0) return Scripted.text(`Step ${id} is finished.\nSTEP STATUS: done`)
    if (id === "s1") {
      return Scripted.toolCalls([
        {
          id: "edit-s1",
          name: "edit_file",
          params: { path: "sum.js", edits: [{ old_text: oldText, new_text: "a + b" }] }
        }
      ])
    }
    const file = id === "s2" ? "notes/b.txt" : "notes/c.txt"
    return Scripted.toolCalls([{ id: `write-${id}`, name: "write_file", params: { path: file, content: `${id}\n` } }])
  }

describe("/plan checks its steps", () => {
  it.scoped("a step whose edit failed is not done, whatever the agent says; the plan stops there", () =>
    Effect.gen(function* () {
      const repo = yield* tempRepo({ "sum.js": "export const sum = (a, b) => a - b\n" })
      const { result, events } = yield* recordLive(
        skillProgram({
          repo,
          languageModel: scriptedModel([byRole({ planner: verifyingPlanner, main: verifyingWorker("a * b") })]).layer,
          inputs: ["/plan fix sum"],
          prompter: answering([Plan.answers.approve]).layer
        })
      )
      expect(result[0]).toMatchObject({ status: "failed", done: 0 })
      const completed = data(ofType(events, "plan.step.completed")[0])
      expect(completed).toMatchObject({ step: "s1", status: "failed" })
      expect(completed.summary).toContain("edit_file of sum.js failed")
      // its verify command is not run for a step that already failed, and later steps do not start
      expect(ofType(events, "plan.step.verified")).toHaveLength(0)
      expect(ofType(events, "plan.step.started").map((e) => data(e).step)).toEqual(["s1"])
      expect(read(repo, "notes/b.txt")).toBeUndefined()
    })
  )

  it.scoped("each step's verify command runs, its result is recorded, and a failing one fails the step", () =>
    Effect.gen(function* () {
      const repo = yield* tempRepo({ "sum.js": "export const sum = (a, b) => a - b\n" })
      const output: Array<string> = []
      const program = (languageModel: Layer.Layer<any>, prompter: Layer.Layer<any>) =>
        skillProgram({ repo, languageModel, inputs: ["/plan fix sum"], prompter, output })
      const { result, events } = yield* recordLive(
        program(
          scriptedModel([byRole({ planner: verifyingPlanner, main: verifyingWorker("a - b") })]).layer,
          answering([Plan.answers.approve]).layer
        )
      )
      expect(read(repo, "sum.js")).toBe("export const sum = (a, b) => a + b\n")
      const verified = ofType(events, "plan.step.verified").map((e) => data(e))
      expect(verified.map((d) => [d.step, d.command, d.passed, d.exitCode])).toEqual([
        ["s1", "grep -q 'a + b' sum.js", true, 0],
        ["s2", "test -f notes/b.txt", true, 0],
        ["s3", "grep -q never notes/c.txt", false, 1]
      ])
      const verifyStarted = ofType(events, "plan.step.verify.started")
      expect(verifyStarted.map((e) => data(e).step)).toEqual(["s1", "s2", "s3"])
      expect(ofType(events, "plan.step.verified")[0]!.parent).toBe(verifyStarted[0]!.id)
      expect(ofType(events, "plan.step.completed").map((e) => [data(e).step, data(e).status])).toEqual([
        ["s1", "done"],
        ["s2", "done"],
        ["s3", "failed"]
      ])
      expect(result[0]).toMatchObject({ status: "failed", done: 2 })
      expect(data(ofType(events, "plan.completed")[0]).reason).toContain(
        "verify `grep -q never notes/c.txt` failed (exit 1)"
      )
      expect(output.some((o) => o.includes("✗ verify [s3]"))).toBe(true)

      // the replay serves the verify results from the log: nothing runs again
      fs.rmSync(path.join(repo, "notes"), { recursive: true })
      const report = yield* Session.replay(program(Model.layerLanguageModelForbidden, neverAsked), {
        events,
        verify: true
      })
      expect(report.matched).toBe(events.length)
    })
  )

  it("finds the command a step's verify names, and none in a description", () => {
    const cwd = process.cwd()
    expect(Planning.verifyCommand("npm test", cwd)).toBe("npm test")
    expect(Planning.verifyCommand("Run `npm run build` and check the output", cwd)).toBe("npm run build")
    expect(Planning.verifyCommand("notes/a.txt exists", cwd)).toBeUndefined()
    expect(Planning.verifyCommand("The tests pass", cwd)).toBeUndefined()
    expect(Planning.verifyCommand("read the README", cwd)).toBeUndefined()
  })
})

/** Two independent steps and one that needs both. */
const parallelPlanner = (s: Seen) => {
  if (s.lastResults.some((r) => r.name === "submit_plan")) return Scripted.text("Plan submitted.")
  const steps = [step("s1", "notes/a.txt"), step("s2", "notes/b.txt"), step("s3", "notes/c.txt", ["s1", "s2"])]
  return Scripted.toolCalls([{ id: "submit", name: "submit_plan", params: { title: "Write the notes", steps } }])
}

describe("/plan with a crew", () => {
  it.live("independent steps are delegated to crew workers, the rest runs on the agent, and it replays exactly", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const repo = yield* tempRepo(files)
        const inputs = ["/plan write three notes"]
        const { result, events } = yield* recordLive(
          skillProgram({
            repo,
            languageModel: scriptedModel([byRole({ planner: parallelPlanner, main: worker(), worker: worker() })])
              .layer,
            inputs,
            prompter: answering([Plan.answers.approve]).layer,
            crew: { reviewRounds: 0 }
          })
        )
        expect(result[0]).toMatchObject({ status: "done", done: 3 })
        expect([read(repo, "notes/a.txt"), read(repo, "notes/b.txt"), read(repo, "notes/c.txt")]).toEqual([
          "s1\n",
          "s2\n",
          "s3\n"
        ])
        const started = ofType(events, "plan.step.started")
        expect(started.map((e) => [data(e).step, data(e).delegated])).toEqual([
          ["s1", true],
          ["s2", true],
          ["s3", false]
        ])
        const writers = events
          .filter((e) => e.type === "tool.started" && data(e).tool === "write_file")
          .map((e) => `${e.agent} ${data(e).params.path}`)
          .sort()
        expect(writers).toEqual(["main notes/c.txt", "worker-1 notes/a.txt", "worker-2 notes/b.txt"])
        const completed = ofType(events, "plan.step.completed")
        expect(completed.map((e) => [data(e).step, data(e).status])).toEqual([
          ["s1", "done"],
          ["s2", "done"],
          ["s3", "done"]
        ])
        expect(data(completed[0]).summary).toContain("Wrote notes/a.txt.")
        expect(started[2]!.seq).toBeGreaterThan(completed[1]!.seq)

        const report = yield* Session.replay(
          skillProgram({
            repo,
            languageModel: Model.layerLanguageModelForbidden,
            inputs,
            prompter: neverAsked,
            crew: { reviewRounds: 0 }
          }),
          { events, verify: true }
        )
        expect(report.matched).toBe(events.length)
      })
    )
  )

  it.live("a blocked delegated step stops the plan before the steps that depend on it", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const repo = yield* tempRepo(files)
        const { result, events } = yield* recordLive(
          skillProgram({
            repo,
            languageModel: scriptedModel([byRole({ planner: parallelPlanner, main: worker(), worker: worker("s2") })])
              .layer,
            inputs: ["/plan write three notes"],
            prompter: answering([Plan.answers.approve]).layer,
            crew: { reviewRounds: 0 }
          })
        )
        expect(result[0]).toMatchObject({ status: "failed", done: 1 })
        expect(ofType(events, "plan.step.completed").map((e) => [data(e).step, data(e).status])).toEqual([
          ["s1", "done"],
          ["s2", "blocked"]
        ])
        expect(data(ofType(events, "plan.completed")[0]).reason).toContain("step s2 blocked")
        expect(read(repo, "notes/c.txt")).toBeUndefined()
      })
    )
  )
})

describe("Plan", () => {
  const plan = (steps: ReadonlyArray<Plan.Step>): Plan.Plan => ({ title: "t", steps })

  it("validates ids and dependencies", () => {
    expect(Plan.validate(plan([step("a", "x"), step("b", "y", ["a"])]))).toEqual([])
    expect(Plan.validate(plan([step("a", "x"), step("a", "y")]))).toEqual(["step id a is used more than once"])
    expect(Plan.validate(plan([step("a", "x", ["z"])]))).toEqual([
      "step a depends on z, which is not a step of the plan"
    ])
    expect(Plan.validate(plan([step("a", "x", ["b"]), step("b", "y", ["a"])]))).toEqual([
      "the dependencies of steps a, b form a cycle"
    ])
  })

  it("orders steps after their dependencies and groups independent ones", () => {
    const p = plan([step("a", "x", ["c"]), step("b", "y"), step("c", "z"), step("d", "w", ["a", "b"])])
    expect(Plan.order(p).map((s) => s.id)).toEqual(["b", "c", "a", "d"])
    expect(Plan.waves(p).map((w) => w.map((s) => s.id))).toEqual([["b", "c"], ["a"], ["d"]])
  })

  it("reads prompter answers as decisions", () => {
    expect(Plan.decide(Plan.answers.approve)).toEqual({ _tag: "approve" })
    expect(Plan.decide(Plan.answers.edit("split step 2"))).toEqual({ _tag: "edit", feedback: "split step 2" })
    expect(Plan.decide(Plan.answers.reject("too risky"))).toEqual({ _tag: "reject", reason: "too risky" })
    expect(Plan.decide(Plan.answers.reject())).toEqual({ _tag: "reject", reason: undefined })
  })
})
