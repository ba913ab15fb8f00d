import { describe, expect, it } from "@effect/vitest"
import { Model, Session } from "@musekit/core"
import { Scripted, scriptedModel } from "@musekit/core/testing"
import { Effect } from "effect"
import { Grill, Plan } from "../src/index.js"
import {
  answering,
  byRole,
  data,
  neverAsked,
  ofType,
  recordLive,
  type Seen,
  skillProgram,
  tempRepo
} from "./helpers.js"

const change = {
  id: "s1",
  intent: "Make add() return the sum",
  files: ["src/add.js"],
  risks: [],
  verify: "read the code",
  dependsOn: []
}
const runTests = {
  id: "s2",
  intent: "Run the test suite",
  files: ["test.js"],
  risks: ["the suite may be slow"],
  verify: "npm test exits 0",
  dependsOn: ["s1"]
}

/** The planner first forgets to test; told about a finding, it adds a test step. */
const planner = (s: Seen) => {
  if (s.lastResults.some((r) => r.name === "submit_plan")) return Scripted.text("Submitted.")
  const steps = s.lastUser.includes("A reviewer who grilled the plan found") ? [change, runTests] : [change]
  return Scripted.toolCalls([{ id: "submit", name: "submit_plan", params: { title: "Fix add()", steps } }])
}

/** The reviewer blocks a plan that never runs the tests (or, `always`, every plan). */
const reviewer =
  (always = false) =>
  (s: Seen) => {
    if (s.lastResults.some((r) => r.name === "submit_findings")) return Scripted.text("Findings submitted.")
    const untested = always || !s.lastUser.includes("npm test exits 0")
    const findings = untested
      ? [
          {
            severity: "blocking",
            category: "untested-path",
            step: "s1",
            issue: "Nothing runs the tests after changing add()",
            suggestion: "Add a step that runs npm test"
          },
          { severity: "minor", issue: "The title could name the bug" }
        ]
      : [{ severity: "minor", category: "risk", step: "s2", issue: "The suite may be slow", suggestion: "" }]
    return Scripted.toolCalls([
      { id: "findings", name: "submit_findings", params: { findings, summary: untested ? "Untested." : "Fine." } }
    ])
  }

const files = { "src/add.js": "export const add = (a, b) => a - b\n" }

describe("/grill", () => {
  it.scoped("turns a plan with a blocking finding into a revised plan, by a reviewer that did not write it", () =>
    Effect.gen(function* () {
      const repo = yield* tempRepo(files)
      const output: Array<string> = []
      const inputs = ["/plan fix add()", "/grill"]
      const { result, events } = yield* recordLive(
        skillProgram({
          repo,
          languageModel: scriptedModel([byRole({ planner, grill: reviewer() })]).layer,
          inputs,
          prompter: answering([Plan.answers.reject()]).layer,
          output
        })
      )
      expect(result[1]).toMatchObject({ id: "plan-1", version: 2, status: "clean", rounds: 2 })

      const findings = ofType(events, "plan.findings")
      expect(findings.map((e) => [data(e).round, data(e).version, data(e).blocking])).toEqual([
        [1, 1, 1],
        [2, 2, 0]
      ])
      expect(data(findings[0]).reviewer).toBe("grill")
      expect(data(findings[0]).findings[0]).toEqual({
        severity: "blocking",
        category: "untested-path",
        step: "s1",
        issue: "Nothing runs the tests after changing add()",
        suggestion: "Add a step that runs npm test"
      })
      // defaults filled in for what the reviewer left out
      expect(data(findings[0]).findings[1]).toEqual({
        severity: "minor",
        category: "other",
        step: null,
        issue: "The title could name the bug",
        suggestion: ""
      })

      const revised = ofType(events, "plan.revised")
      expect(revised).toHaveLength(1)
      expect(data(revised[0])).toMatchObject({ id: "plan-1", version: 2, reason: "grill" })
      expect(data(revised[0]).feedback).toContain("[blocking] (s1) untested-path: Nothing runs the tests")
      expect(data(revised[0]).plan.steps.map((s: Plan.Step) => s.id)).toEqual(["s1", "s2"])
      expect(revised[0]!.seq).toBeGreaterThan(findings[0]!.seq)
      expect(revised[0]!.seq).toBeLessThan(findings[1]!.seq)
      expect(data(ofType(events, "plan.grill.completed")[0])).toMatchObject({ status: "clean", rounds: 2, blocking: 0 })

      // the reviewer is a separate agent with its own instructions and no way to submit plans
      const grillRequests = events.filter((e) => e.type === "model.requested" && e.agent === "grill")
      const plannerRequests = events.filter((e) => e.type === "model.requested" && e.agent === "planner")
      expect(grillRequests.length).toBeGreaterThan(0)
      expect(data(grillRequests[0]).system).not.toBe(data(plannerRequests[0]).system)
      expect(data(grillRequests[0]).tools).toContain("submit_findings")
      expect(data(grillRequests[0]).tools).not.toContain("submit_plan")
      expect(data(plannerRequests[0]).tools).not.toContain("submit_findings")
      const submittedBy = events
        .filter((e) => e.type === "tool.started" && data(e).tool === "submit_plan")
        .map((e) => e.agent)
      expect(new Set(submittedBy)).toEqual(new Set(["planner"]))

      expect(output.join("\n")).toContain("Grill round 1 of plan-1 version 1: 1 blocking, 1 other finding(s).")
      expect(output.at(-1)).toBe("Run /plan to approve and run version 2 of plan-1.")
      expect(Grill.render(data(findings[0]).findings).split("\n")[0]).toBe(
        "- [blocking] (s1) untested-path: Nothing runs the tests after changing add()"
      )

      const report = yield* Session.replay(
        skillProgram({ repo, languageModel: Model.layerLanguageModelForbidden, inputs, prompter: neverAsked }),
        { events, verify: true }
      )
      expect(report.matched).toBe(events.length)
    })
  )

  it.scoped("stops at the round limit when blocking findings remain, and says so", () =>
    Effect.gen(function* () {
      const repo = yield* tempRepo(files)
      const output: Array<string> = []
      const { result, events } = yield* recordLive(
        skillProgram({
          repo,
          languageModel: scriptedModel([byRole({ planner, grill: reviewer(true) })]).layer,
          inputs: ["/plan fix add()", "/grill --rounds 2"],
          prompter: answering([Plan.answers.reject()]).layer,
          output
        })
      )
      expect(result[1]).toMatchObject({ status: "round-limit", rounds: 2 })
      expect(ofType(events, "plan.findings").map((e) => data(e).blocking)).toEqual([1, 1])
      expect(ofType(events, "plan.revised")).toHaveLength(1)
      expect(data(ofType(events, "plan.grill.completed")[0])).toMatchObject({ status: "round-limit", blocking: 1 })
      expect(output.join("\n")).toContain("Round limit of 2 reached: 1 blocking finding(s) remain on version 2")
    })
  )

  it.scoped("/plan --grill grills before asking, and asks about the revised plan", () =>
    Effect.gen(function* () {
      const repo = yield* tempRepo(files)
      const prompter = answering([Plan.answers.reject()])
      const { events } = yield* recordLive(
        skillProgram({
          repo,
          languageModel: scriptedModel([byRole({ planner, grill: reviewer() })]).layer,
          inputs: ["/plan --grill fix add()"],
          prompter: prompter.layer
        })
      )
      expect(data(ofType(events, "plan.proposed")[0]).task).toBe("fix add()")
      const asked = ofType(events, "plan.approval.requested")[0]!
      expect(data(asked)).toMatchObject({ version: 2, steps: 2 })
      expect(asked.seq).toBeGreaterThan(ofType(events, "plan.grill.completed")[0]!.seq)
      expect(prompter.asked[0]!.preview).toContain("[s2] Run the test suite")
    })
  )

  it.scoped("/grill without a plan is a clear error", () =>
    Effect.gen(function* () {
      const repo = yield* tempRepo(files)
      const err = yield* Effect.flip(
        recordLive(skillProgram({ repo, languageModel: scriptedModel([]).layer, inputs: ["/grill"] }))
      )
      expect(err.message).toBe("there is no plan to grill yet: run /plan <task> first, or give the plan: /grill <plan>")
    })
  )
})
