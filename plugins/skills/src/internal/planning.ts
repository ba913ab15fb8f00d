import * as fs from "node:fs"
import * as path from "node:path"
import type { Prompt } from "@effect/ai"
import { Agent, Approvals, Recorder, type Skill, Tools, Workspace } from "@musekit/core"
import { Effect, Option, Schema } from "effect"
import * as Goal from "../Goal.js"
import * as Grill from "../Grill.js"
import * as Plan from "../Plan.js"
import { clip, helperName, messageText, record, skillError } from "./common.js"
import { type CurrentPlan, type State, stateOf } from "./state.js"

/** A helper agent (planner, reviewer, judge): its name, instructions, tools and budget. */
export interface Helper {
  readonly name: string
  readonly instructions: string
  readonly tools: ReadonlyArray<string> | "*"
  readonly budget?: Agent.Budget | undefined
}

export interface Settings {
  readonly planner: Helper
  readonly reviewer: Helper
  readonly maxRevisions: number
  readonly rounds: number
  readonly grillBeforeApproval: boolean
  readonly parallel: boolean
  readonly crewRole: string
  readonly verifyTimeoutMs: number
  readonly outputTailChars: number
  readonly cwd: string | undefined
}

export type Ctx = Skill.ContextService

/** Ends a skill early but normally (an interrupted turn), with a reason for the user. */
export class Stopped extends Schema.TaggedError<Stopped>("@musekit/plugin-skills/Stopped")("Stopped", {
  reason: Schema.String
}) {}

export const PIN = "<pinned>"

/** A text part that the compaction plugin keeps (by its `muse.pin` option and its `<pinned>` marker). */
export const pinnedPart = (kind: string, text: string): Prompt.UserMessagePartEncoded =>
  ({
    type: "text",
    text: `${PIN}\n${text}\n</pinned>`,
    options: { muse: { pin: kind } }
  }) as Prompt.UserMessagePartEncoded

const stopIfInterrupted = (r: Agent.TurnResult, who: string) =>
  r.status === "interrupted" ? Effect.fail(new Stopped({ reason: `the ${who}'s turn was interrupted` })) : Effect.void

// ---------------------------------------------------------------------------------------------
// Internal tools
// ---------------------------------------------------------------------------------------------

export const submitPlanTool = (st: State) =>
  Tools.make({
    name: "submit_plan",
    description:
      "Submit the complete plan (title and steps). Call it once when the plan is ready, and again with the whole revised plan when asked to revise it.",
    parameters: Plan.Plan.fields,
    effect: "read",
    durableIntent: false,
    internal: true,
    summarize: (p) => `submit_plan "${p.title}" (${p.steps.length} steps)`,
    handler: (plan) =>
      Effect.suspend(() => {
        const problems = Plan.validate(plan)
        if (problems.length > 0) {
          return Effect.fail(
            new Tools.ToolError({
              message: `the plan was not accepted: ${problems.join("; ")}. Fix it and submit again.`
            })
          )
        }
        st.submittedPlan = plan
        return Effect.succeed({
          accepted: true,
          steps: plan.steps.length,
          next: "The plan will be shown to the user. Answer with one short sentence."
        })
      })
  })

export const submitFindingsTool = (st: State) =>
  Tools.make({
    name: "submit_findings",
    description:
      "Submit your findings about the plan: each with severity blocking, major or minor, the step it is about, what is wrong and how to fix it. Submit an empty list when you found nothing.",
    parameters: Grill.Findings.fields,
    effect: "read",
    durableIntent: false,
    internal: true,
    summarize: (f) => `submit_findings (${f.findings.length}, ${Grill.blocking(f.findings).length} blocking)`,
    handler: (f) =>
      Effect.sync(() => {
        st.submittedFindings = f
        return { received: f.findings.length, next: "Answer with one short sentence." }
      })
  })

// The internal tools fill these slots while a helper agent's turn runs.
const hasPlan = (st: State) => st.submittedPlan !== undefined
const takePlan = (st: State): Plan.Plan | undefined => {
  const p = st.submittedPlan
  st.submittedPlan = undefined
  return p
}
const hasFindings = (st: State) => st.submittedFindings !== undefined
const takeFindings = (st: State): Grill.Findings | undefined => {
  const f = st.submittedFindings
  st.submittedFindings = undefined
  return f
}

// ---------------------------------------------------------------------------------------------
// Helper agents
// ---------------------------------------------------------------------------------------------

const makeHelper = (ctx: Ctx, helper: Helper, extra: Tools.Definition, restore: Agent.State | undefined) =>
  Agent.make({
    name: helperName(ctx.agent.name, helper.name),
    instructions: helper.instructions,
    tools: helper.tools,
    budget: helper.budget,
    extraTools: [extra],
    restore
  })

const plannerOf = (ctx: Ctx, settings: Settings) =>
  Effect.gen(function* () {
    const st = yield* stateOf(ctx.agent)
    if (!st.planner) st.planner = yield* makeHelper(ctx, settings.planner, submitPlanTool(st), st.restored.planner)
    return st.planner
  })

const reviewerOf = (ctx: Ctx, settings: Settings) =>
  Effect.gen(function* () {
    const st = yield* stateOf(ctx.agent)
    if (!st.reviewer)
      st.reviewer = yield* makeHelper(ctx, settings.reviewer, submitFindingsTool(st), st.restored.reviewer)
    return st.reviewer
  })

/** Ask the planner for a plan; nudge it once if it answers without submitting one. */
const askPlanner = (ctx: Ctx, settings: Settings, message: string) =>
  Effect.gen(function* () {
    const st = yield* stateOf(ctx.agent)
    const planner = yield* plannerOf(ctx, settings)
    st.submittedPlan = undefined
    let r = yield* planner.send(message)
    yield* stopIfInterrupted(r, "planner")
    if (!hasPlan(st) && r.status === "completed") {
      r = yield* planner.send("You did not submit a plan. Call submit_plan now with the complete plan.")
      yield* stopIfInterrupted(r, "planner")
    }
    const plan = takePlan(st)
    if (plan === undefined) {
      return yield* skillError(
        "plan",
        `the planner (${planner.name}) did not submit a plan: its turn ended with status ${r.status}${
          r.reason ? ` (${r.reason})` : ""
        }${r.text ? `; it said: ${clip(r.text, 300)}` : ""}`
      )
    }
    return plan
  })

// ---------------------------------------------------------------------------------------------
// Proposing and revising
// ---------------------------------------------------------------------------------------------

const show = (cur: CurrentPlan) => Plan.render(cur.plan, { version: cur.version })

/** A new plan for `task`, recorded as `plan.proposed` and shown to the user. */
export const propose = (ctx: Ctx, settings: Settings, task: string) =>
  Effect.gen(function* () {
    const plan = yield* askPlanner(
      ctx,
      settings,
      `Plan this task:\n\n${task}\n\nLook at the repository as far as you need to, then call submit_plan with the complete plan.`
    )
    return yield* adopt(ctx, task, plan)
  })

/** Make `plan` the current plan (version 1), recorded as `plan.proposed`. */
export const adopt = (ctx: Ctx, task: string, plan: Plan.Plan) =>
  Effect.gen(function* () {
    const st = yield* stateOf(ctx.agent)
    st.plans++
    const cur: CurrentPlan = { id: `plan-${st.plans}`, task, plan, version: 1, status: "proposed" }
    st.current = cur
    yield* record(ctx.agent.name, "plan.proposed", { id: cur.id, version: 1, task, plan })
    yield* ctx.output(show(cur))
    return cur
  })

/** Have the planner revise the current plan, recorded as `plan.revised` and shown to the user. */
export const revise = (
  ctx: Ctx,
  settings: Settings,
  cur: CurrentPlan,
  reason: "edit" | "reject" | "grill",
  feedback: string
) =>
  Effect.gen(function* () {
    const why =
      reason === "edit"
        ? `The user asked for these changes:\n${feedback}`
        : reason === "reject"
          ? `The user rejected the plan: ${feedback}\nPropose a plan that answers this objection; take a different approach where needed.`
          : `A reviewer who grilled the plan found these problems:\n${feedback}\nAddress every blocking and major finding.`
    const plan = yield* askPlanner(
      ctx,
      settings,
      `Revise the plan "${cur.plan.title}" (version ${cur.version}) for the task:\n${cur.task}\n\n${why}\n\nThe current plan, as JSON:\n${JSON.stringify(
        cur.plan,
        null,
        2
      )}\n\nSubmit the complete revised plan with submit_plan.`
    )
    cur.plan = plan
    cur.version++
    cur.status = "proposed"
    yield* record(ctx.agent.name, "plan.revised", {
      id: cur.id,
      version: cur.version,
      reason,
      feedback,
      plan
    })
    yield* ctx.output(`Revised (${reason}):\n${show(cur)}`)
    return cur
  })

// ---------------------------------------------------------------------------------------------
// Grilling
// ---------------------------------------------------------------------------------------------

export interface GrillResult {
  readonly status: "clean" | "round-limit"
  readonly rounds: number
  readonly blocking: ReadonlyArray<Grill.Finding>
}

/** Review rounds by the reviewer agent, each followed by a revision while blocking findings remain. */
export const grill = (ctx: Ctx, settings: Settings, cur: CurrentPlan, rounds: number) =>
  Effect.gen(function* () {
    const st = yield* stateOf(ctx.agent)
    const reviewer = yield* reviewerOf(ctx, settings)
    let blocking: ReadonlyArray<Grill.Finding> = []
    for (let round = 1; round <= rounds; round++) {
      st.submittedFindings = undefined
      let r = yield* reviewer.send(
        `Grill this plan (${cur.id}, version ${cur.version}, review round ${round} of at most ${rounds}).\n\nThe task it is for:\n${
          cur.task
        }\n\n${Plan.render(cur.plan)}\n\nThe plan as JSON:\n${JSON.stringify(
          cur.plan,
          null,
          2
        )}\n\nCheck what you need in the repository, then call submit_findings.`
      )
      yield* stopIfInterrupted(r, "reviewer")
      if (!hasFindings(st) && r.status === "completed") {
        r = yield* reviewer.send("You did not submit your findings. Call submit_findings now (an empty list if none).")
        yield* stopIfInterrupted(r, "reviewer")
      }
      const submitted = takeFindings(st)
      if (submitted === undefined) {
        return yield* skillError(
          "grill",
          `the reviewer (${reviewer.name}) did not submit findings: its turn ended with status ${r.status}${
            r.reason ? ` (${r.reason})` : ""
          }`
        )
      }
      blocking = Grill.blocking(submitted.findings)
      yield* record(ctx.agent.name, "plan.findings", {
        id: cur.id,
        version: cur.version,
        round,
        reviewer: reviewer.name,
        findings: submitted.findings,
        summary: submitted.summary,
        blocking: blocking.length
      })
      yield* ctx.output(
        `Grill round ${round} of ${cur.id} version ${cur.version}: ${blocking.length} blocking, ${
          submitted.findings.length - blocking.length
        } other finding(s).${submitted.summary ? ` ${submitted.summary}` : ""}\n${Grill.render(submitted.findings)}`
      )
      if (blocking.length === 0) {
        yield* record(ctx.agent.name, "plan.grill.completed", {
          id: cur.id,
          version: cur.version,
          rounds: round,
          status: "clean",
          blocking: 0
        })
        return { status: "clean", rounds: round, blocking } satisfies GrillResult
      }
      if (round === rounds) break
      yield* revise(ctx, settings, cur, "grill", Grill.render(submitted.findings))
    }
    yield* record(ctx.agent.name, "plan.grill.completed", {
      id: cur.id,
      version: cur.version,
      rounds,
      status: "round-limit",
      blocking: blocking.length
    })
    yield* ctx.output(
      `Round limit of ${rounds} reached: ${blocking.length} blocking finding(s) remain on version ${cur.version}:\n${Grill.render(blocking)}`
    )
    return { status: "round-limit", rounds, blocking } satisfies GrillResult
  })

// ---------------------------------------------------------------------------------------------
// Approval
// ---------------------------------------------------------------------------------------------

const askApproval = (ctx: Ctx, cur: CurrentPlan) =>
  Effect.gen(function* () {
    const prompter = yield* Approvals.Prompter
    const owner = ctx.agent.name
    const { value } = yield* Recorder.step<Plan.Decision, never, never>({
      agent: owner,
      intent: {
        type: "plan.approval.requested",
        data: { id: cur.id, version: cur.version, title: cur.plan.title, steps: cur.plan.steps.length }
      },
      run: () =>
        Effect.map(
          prompter.ask({
            agent: owner,
            tool: "/plan",
            effect: "exec",
            summary: `run the plan "${cur.plan.title}" (${cur.plan.steps.length} steps)`,
            preview: show(cur)
          }),
          Plan.decide
        ),
      outcome: (d) => ({
        type: "plan.approval.answered",
        data: {
          id: cur.id,
          version: cur.version,
          decision: d._tag,
          feedback: d._tag === "edit" ? d.feedback : d._tag === "reject" ? (d.reason ?? null) : null
        }
      }),
      outcomeTypes: ["plan.approval.answered"],
      fromOutcome: (e): Plan.Decision => {
        const d = e.data as { decision: string; feedback: string | null }
        return d.decision === "approve"
          ? { _tag: "approve" }
          : d.decision === "edit"
            ? { _tag: "edit", feedback: d.feedback ?? "" }
            : { _tag: "reject", reason: d.feedback ?? undefined }
      }
    })
    return value
  })

/**
 * Ask the person until the plan is approved (true) or dropped (false). Edits and rejections with a
 * reason revise the plan first; after `maxRevisions` revisions the plan is dropped.
 */
export const approve = (ctx: Ctx, settings: Settings, cur: CurrentPlan) =>
  Effect.gen(function* () {
    let revisions = 0
    while (true) {
      const decision = yield* askApproval(ctx, cur)
      if (decision._tag === "approve") {
        cur.status = "approved"
        yield* ctx.output(`Plan ${cur.id} version ${cur.version} approved.`)
        return true
      }
      const feedback = decision._tag === "edit" ? decision.feedback : decision.reason
      const reason =
        feedback === undefined
          ? "rejected by the user"
          : revisions >= settings.maxRevisions
            ? `still not approved after ${revisions} revision(s)`
            : undefined
      if (reason !== undefined) {
        cur.status = "rejected"
        yield* record(ctx.agent.name, "plan.completed", {
          id: cur.id,
          version: cur.version,
          status: "rejected",
          done: 0,
          total: cur.plan.steps.length,
          reason
        })
        yield* ctx.output(`Plan ${cur.id} was not run: ${reason}.`)
        return false
      }
      revisions++
      yield* revise(ctx, settings, cur, decision._tag, feedback!)
    }
  })

// ---------------------------------------------------------------------------------------------
// Execution
// ---------------------------------------------------------------------------------------------

const list = (xs: ReadonlyArray<string>) => (xs.length === 0 ? "none named" : xs.join(", "))

const stepTask = (cur: CurrentPlan, step: Plan.Step, index: number, total: number) =>
  [
    `Carry out step ${step.id} (${index} of ${total}) of the approved plan "${cur.plan.title}":`,
    step.intent,
    `Files: ${list(step.files)}`,
    `Risks: ${step.risks.length === 0 ? "none named" : step.risks.join("; ")}`,
    `Verify: ${step.verify}`,
    `Do only this step and verify it as described. End your reply with the line "STEP STATUS: done", or "STEP STATUS: blocked — <why>" if it cannot be done or the verification fails.`
  ].join("\n")

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/** Write tool calls of a turn (from the history it added) that failed and were not made good later. */
const failedWrites = (added: ReadonlyArray<Prompt.MessageEncoded>, writeTools: ReadonlySet<string>) => {
  const calls = new Map<string, { readonly name: string; readonly path: string }>()
  const failed = new Map<string, string>()
  for (const m of added) {
    if (m.role === "assistant" && typeof m.content !== "string") {
      for (const p of m.content) {
        if (p.type !== "tool-call" || !writeTools.has(p.name)) continue
        const path = (p.params as { path?: unknown } | null)?.path
        calls.set(p.id, { name: p.name, path: typeof path === "string" ? path : "" })
      }
    }
    if (m.role !== "tool") continue
    for (const r of m.content) {
      const call = calls.get(r.id)
      if (!call) continue
      if (r.isFailure) {
        const error = (r.result as { error?: unknown } | null)?.error
        failed.set(
          call.path,
          `${call.name}${call.path ? ` of ${call.path}` : ""} failed${typeof error === "string" ? `: ${error}` : ""}`
        )
      } else failed.delete(call.path)
    }
  }
  return [...failed.values()]
}

/**
 * The command a step's `verify` names, if it names one: the text in backticks, or the whole line
 * when its first word is a program on the PATH (`npm test`, `test -f notes/a.txt`). A check to be
 * done by looking ("notes/a.txt exists") names none.
 */
export const verifyCommand = (verify: string, cwd: string): string | undefined => {
  const quoted = /`([^`\n]+)`/.exec(verify)?.[1]?.trim()
  const line = quoted ?? (verify.includes("\n") ? undefined : verify.trim())
  if (!line) return undefined
  const first = /^[^\s;&|<>()]+/.exec(line)?.[0]
  if (!first) return undefined
  if (quoted) return line
  const isProgram = (p: string) => {
    try {
      return fs.statSync(p).isFile() && (fs.statSync(p).mode & 0o111) !== 0
    } catch {
      return false
    }
  }
  if (first.includes("/")) return isProgram(path.resolve(cwd, first)) ? line : undefined
  const dirs = (process.env.PATH ?? "").split(path.delimiter).filter(Boolean)
  return dirs.some((d) => isProgram(path.join(d, first))) ? line : undefined
}

const statusOf = (r: { readonly status: string; readonly text: string }) => {
  if (r.status !== "completed") return r.status
  const last = [...r.text.matchAll(/STEP STATUS:\s*(done|blocked)/gi)].at(-1)
  return last && last[1]!.toLowerCase() === "blocked" ? "blocked" : "done"
}

export interface Outcome {
  readonly status: "done" | "failed"
  readonly done: number
  readonly total: number
  readonly reason?: string | undefined
}

/** Run an approved plan: steps in dependency order, independent ones on the crew when there is one. */
export const execute = (ctx: Ctx, settings: Settings, cur: CurrentPlan) =>
  Effect.gen(function* () {
    const st = yield* stateOf(ctx.agent)
    st.executions++
    const run = st.executions
    const owner = ctx.agent.name
    const cwd = settings.cwd ?? (yield* Workspace.Workspace).root
    const registry = yield* Effect.serviceOption(Tools.Tools)
    const writeTools = new Set(
      Option.match(registry, {
        onNone: () => [],
        onSome: (r) => r.list.filter((t) => t.effect === "write").map((t) => t.name)
      })
    )

    /** Run a step's verify command in the workspace, recorded (a replay serves the result from the log). */
    const verifyStep = (step: Plan.Step, command: string) =>
      Effect.gen(function* () {
        const { value } = yield* Recorder.step<Goal.CommandResult, never, never>({
          agent: owner,
          intent: {
            type: "plan.step.verify.started",
            data: { id: cur.id, version: cur.version, step: step.id, command }
          },
          run: () => Goal.runCommand({ command, cwd, timeoutMs: settings.verifyTimeoutMs }),
          outcome: (r) => ({
            type: "plan.step.verified",
            data: {
              id: cur.id,
              version: cur.version,
              step: step.id,
              command,
              passed: r.exitCode === 0 && !r.timedOut,
              exitCode: r.exitCode,
              timedOut: r.timedOut,
              durationMs: r.durationMs,
              output: r.output.slice(-settings.outputTailChars)
            }
          }),
          outcomeTypes: ["plan.step.verified"],
          fromOutcome: (e) => {
            const d = e.data as any
            return { exitCode: d.exitCode, output: d.output, timedOut: d.timedOut, durationMs: d.durationMs }
          }
        })
        const passed = value.exitCode === 0 && !value.timedOut
        const status = value.timedOut ? "timed out" : `exit ${value.exitCode ?? "none"}`
        yield* ctx.output(`${passed ? "✓" : "✗"} verify [${step.id}] \`${command}\` ${passed ? "passed" : status}`)
        return { passed, status, output: value.output.slice(-settings.outputTailChars) }
      })
    const total = cur.plan.steps.length
    const base = { id: cur.id, version: cur.version }
    cur.status = "running"
    let index = 0
    let pinned = false
    let done = 0

    const finish = (status: "done" | "failed", reason?: string) =>
      Effect.gen(function* () {
        cur.status = status
        yield* record(owner, "plan.completed", { ...base, status, done, total, reason: reason ?? null })
        yield* ctx.output(
          status === "done"
            ? `Plan ${cur.id} done: all ${total} steps completed.`
            : `Plan ${cur.id} stopped after ${done} of ${total} steps: ${reason}`
        )
        return { status, done, total, reason } satisfies Outcome
      })

    const completed = (step: Plan.Step, status: string, summary: string, i: number) =>
      Effect.gen(function* () {
        yield* record(owner, "plan.step.completed", { ...base, step: step.id, status, summary: clip(summary, 2000) })
        yield* ctx.output(
          `${status === "done" ? "✓" : "✗"} step ${i}/${total} [${step.id}] ${status}${
            status === "done" ? "" : `: ${clip(summary, 300)}`
          }`
        )
        if (status === "done") done++
      })

    const batches = settings.parallel && ctx.crew ? Plan.waves(cur.plan) : Plan.order(cur.plan).map((s) => [s])
    for (const batch of batches) {
      if (batch.length > 1 && ctx.crew) {
        const crew = ctx.crew
        const started: Array<{ step: Plan.Step; i: number; task: string }> = []
        for (const step of batch) {
          index++
          const task = `plan-${run}-${step.id}`
          yield* record(owner, "plan.step.started", {
            ...base,
            step: step.id,
            index,
            total,
            intent: step.intent,
            delegated: true
          })
          yield* ctx.output(`→ step ${index}/${total} [${step.id}] delegated to the crew: ${clip(step.intent, 120)}`)
          const r = yield* crew
            .delegate({
              to: settings.crewRole,
              task: `${PIN}\n${Plan.render(cur.plan, { version: cur.version })}\n</pinned>\n\n${stepTask(cur, step, index, total)}`,
              from: owner,
              id: task
            })
            .pipe(Effect.either)
          if (r._tag === "Left") {
            yield* completed(step, "failed", r.left.message, index)
            return yield* finish("failed", `step ${step.id} could not be delegated: ${r.left.message}`)
          }
          started.push({ step, i: index, task })
        }
        yield* crew.run(ctx.agent, ctx.sendOptions)
        const reports = (yield* ctx.agent.history)
          .filter((m) => m.role === "user")
          .map(messageText)
          .join("\n")
        let failed: string | undefined
        for (const s of started) {
          const m = new RegExp(
            `finished task ${escapeRegExp(s.task)} with status (\\w+)([\\s\\S]*?)(?=\\n\\[(?:blocking|notable)\\] |\\nDigest of |$)`
          ).exec(reports)
          const status = m ? statusOf({ status: m[1]!, text: m[2]! }) : "failed"
          const summary = m
            ? m[2]!
                .replace(/^ \(review: .*?round\(s\)\)/, "")
                .replace(/^:\s*/, "")
                .trim()
            : "no report from the crew"
          yield* completed(s.step, status, summary, s.i)
          if (status !== "done" && failed === undefined) failed = `step ${s.step.id} ${status}: ${clip(summary, 300)}`
        }
        if (failed !== undefined) return yield* finish("failed", failed)
        continue
      }
      for (const step of batch) {
        index++
        yield* record(owner, "plan.step.started", {
          ...base,
          step: step.id,
          index,
          total,
          intent: step.intent,
          delegated: false
        })
        yield* ctx.output(`→ step ${index}/${total} [${step.id}]: ${clip(step.intent, 120)}`)
        const text = stepTask(cur, step, index, total)
        const content: Array<Prompt.UserMessagePartEncoded> = pinned
          ? [{ type: "text", text }]
          : [pinnedPart("plan", `Approved plan (${cur.id}):\n${show(cur)}`), { type: "text", text }]
        pinned = true
        const before = (yield* ctx.agent.history).length
        const r = yield* ctx.agent.send(content, ctx.sendOptions)
        if (r.status === "interrupted") {
          yield* completed(step, "interrupted", r.reason ?? "", index)
          yield* finish("failed", `step ${step.id} was interrupted`)
          return yield* new Stopped({ reason: "the turn was interrupted" })
        }
        // done only when what it changed was changed and its verify command (if it names one) passes
        let status = statusOf(r)
        let summary = r.text || r.reason || ""
        const failures = failedWrites((yield* ctx.agent.history).slice(before), writeTools)
        if (failures.length > 0) {
          status = "failed"
          summary = `${failures.join("; ")}${summary ? `\n${summary}` : ""}`
        }
        const command = status === "done" ? verifyCommand(step.verify, cwd) : undefined
        if (command !== undefined) {
          const check = yield* verifyStep(step, command)
          if (!check.passed) {
            status = "failed"
            summary = `verify \`${command}\` failed (${check.status}):\n${check.output}`
          }
        }
        yield* completed(step, status, summary, index)
        if (status !== "done") {
          return yield* finish("failed", `step ${step.id} ${status}: ${clip(summary, 300)}`)
        }
      }
    }
    return yield* finish("done")
  })
