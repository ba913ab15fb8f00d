/**
 * Plans: what `/plan` produces, `/grill` attacks and the agent carries out after approval.
 *
 * A `Plan` is a title and steps; each step says what it does (`intent`), which `files` it touches,
 * its `risks`, how it is verified (`verify`) and which steps must come first (`dependsOn`). The
 * planner submits it through the internal tool `submit_plan`; it is checked with `validate`
 * (unique ids, known dependencies, no cycles) before it is accepted.
 *
 * Everything that happens to a plan is an event of the agent that ran the skill:
 *
 * | event                     | data                                                          |
 * |---------------------------|---------------------------------------------------------------|
 * | `plan.proposed`           | `{ id, version, task, plan }`                                 |
 * | `plan.revised`            | `{ id, version, reason: "edit" \| "reject" \| "grill", feedback, plan }` |
 * | `plan.approval.requested` | `{ id, version, title, steps }` (then the person's answer)     |
 * | `plan.approval.answered`  | `{ id, version, decision: "approve" \| "edit" \| "reject", feedback }` |
 * | `plan.findings`           | `{ id, version, round, reviewer, findings, summary, blocking }` |
 * | `plan.grill.completed`    | `{ id, version, rounds, status: "clean" \| "round-limit", blocking }` |
 * | `plan.step.started`       | `{ id, version, step, index, total, intent, delegated }`      |
 * | `plan.step.verify.started` | `{ id, version, step, command }` (then the command's result)  |
 * | `plan.step.verified`      | `{ id, version, step, command, passed, exitCode, timedOut, durationMs, output }` |
 * | `plan.step.completed`     | `{ id, version, step, status, summary }`                      |
 * | `plan.completed`          | `{ id, version, status, done, total, reason }`                |
 *
 * A step run by the agent itself is `done` only when the agent says so, no write of the step failed
 * without being made good, and its verify command passes: the `verify` of a step names a command
 * when it is one (`npm test`, `test -f a.txt`) or holds one in backticks; that command is run in the
 * workspace after the step and its result recorded. A step delegated to the crew is done when its
 * worker reports it done.
 *
 * `fromEvents` folds a log into the latest plan and its status, for UIs and tools.
 *
 * @example
 * ```ts
 * import { Plan } from "@musekit/plugin-skills"
 *
 * const plan: Plan.Plan = {
 *   title: "Add a --json flag",
 *   steps: [
 *     { id: "s1", intent: "Parse the flag", files: ["src/cli.ts"], risks: [], verify: "npm test", dependsOn: [] },
 *     { id: "s2", intent: "Document it", files: ["README.md"], risks: [], verify: "read it", dependsOn: ["s1"] }
 *   ]
 * }
 * Plan.validate(plan)   // [] — no problems
 * Plan.order(plan)      // steps in dependency order
 * console.log(Plan.render(plan))
 * ```
 */
import type { Approvals, Event } from "@musekit/core"
import { Option, Schema } from "effect"

const StringList = (description: string) =>
  Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] }).annotations({ description })

/** One step of a plan. `files`, `risks` and `dependsOn` may be omitted by the model (empty). */
export const Step = Schema.Struct({
  id: Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$/)).annotations({
    description: "Short stable id like s1, s2 (letters, digits, '.', '_', '-')"
  }),
  intent: Schema.String.pipe(Schema.minLength(1)).annotations({
    description: "What the step does and why, concrete enough to act on"
  }),
  files: StringList("Workspace-relative paths the step reads or changes"),
  risks: StringList("What could go wrong, and what would have to be undone"),
  verify: Schema.String.pipe(Schema.minLength(1)).annotations({
    description: "How to tell the step worked: preferably a command that must pass"
  }),
  dependsOn: StringList("Ids of steps that must be finished before this one")
})
export type Step = typeof Step.Type

/** A plan: a title and at least one step. */
export const Plan = Schema.Struct({
  title: Schema.String.pipe(Schema.minLength(1)).annotations({
    description: "What will be different when the plan is done"
  }),
  steps: Schema.Array(Step).pipe(Schema.minItems(1))
})
export type Plan = typeof Plan.Type

/** Where a plan stands. */
export type Status = "proposed" | "approved" | "rejected" | "running" | "done" | "failed"

/** Problems that make a plan unusable: duplicate ids, unknown or self dependencies, cycles. */
export const validate = (plan: Plan): ReadonlyArray<string> => {
  const problems: Array<string> = []
  const ids = new Set<string>()
  for (const s of plan.steps) {
    if (ids.has(s.id)) problems.push(`step id ${s.id} is used more than once`)
    ids.add(s.id)
  }
  for (const s of plan.steps) {
    for (const d of s.dependsOn) {
      if (d === s.id) problems.push(`step ${s.id} depends on itself`)
      else if (!ids.has(d)) problems.push(`step ${s.id} depends on ${d}, which is not a step of the plan`)
    }
  }
  if (problems.length === 0 && order(plan).length < plan.steps.length) {
    const cyclic = plan.steps.filter((s) => !order(plan).includes(s)).map((s) => s.id)
    problems.push(`the dependencies of steps ${cyclic.join(", ")} form a cycle`)
  }
  return problems
}

/**
 * The steps in dependency order: a step comes after everything it depends on and otherwise keeps
 * its place in the plan. Steps caught in a cycle are left out (`validate` reports them).
 */
export const order = (plan: Plan): ReadonlyArray<Step> => {
  const done = new Set<string>()
  const out: Array<Step> = []
  const known = new Set(plan.steps.map((s) => s.id))
  let progress = true
  while (progress && out.length < plan.steps.length) {
    progress = false
    for (const s of plan.steps) {
      if (done.has(s.id)) continue
      if (s.dependsOn.every((d) => done.has(d) || !known.has(d))) {
        done.add(s.id)
        out.push(s)
        progress = true
        break
      }
    }
  }
  return out
}

/**
 * The steps grouped into waves: every step of a wave depends only on steps of earlier waves, so the
 * steps of one wave are independent of each other and may run in parallel.
 */
export const waves = (plan: Plan): ReadonlyArray<ReadonlyArray<Step>> => {
  const level = new Map<string, number>()
  for (const s of order(plan)) {
    const deps = s.dependsOn.filter((d) => level.has(d)).map((d) => level.get(d)!)
    level.set(s.id, deps.length === 0 ? 0 : Math.max(...deps) + 1)
  }
  const out: Array<Array<Step>> = []
  for (const s of plan.steps) {
    const l = level.get(s.id)
    if (l === undefined) continue
    while (out.length <= l) out.push([])
    out[l]!.push(s)
  }
  return out
}

const list = (xs: ReadonlyArray<string>) => (xs.length === 0 ? "none" : xs.join(", "))

/** The plan as text for people (and for the agents that carry it out). */
export const render = (plan: Plan, options: { readonly version?: number | undefined } = {}): string => {
  const head = `Plan: ${plan.title}${options.version !== undefined ? ` (version ${options.version})` : ""}`
  const lines = [head]
  plan.steps.forEach((s, i) => {
    lines.push(`${i + 1}. [${s.id}] ${s.intent}`)
    lines.push(`   files: ${list(s.files)}`)
    lines.push(`   risks: ${list(s.risks)}`)
    lines.push(`   verify: ${s.verify}`)
    if (s.dependsOn.length > 0) lines.push(`   after: ${s.dependsOn.join(", ")}`)
  })
  return lines.join("\n")
}

// ---------------------------------------------------------------------------------------------
// Approval answers
// ---------------------------------------------------------------------------------------------

/** What a person decided about a proposed plan. */
export type Decision =
  | { readonly _tag: "approve" }
  | { readonly _tag: "edit"; readonly feedback: string }
  | { readonly _tag: "reject"; readonly reason: string | undefined }

const EDIT_PREFIX = "edit:"

/**
 * The `Approvals.Answer`s a prompter gives for a plan (the approval of a plan goes through the same
 * `Prompter` as tool calls, with `tool: "/plan"` and the rendered plan as `preview`):
 *
 * - `approve` runs the plan;
 * - `edit(feedback)` has the planner revise it with the feedback, then asks again;
 * - `reject(reason)` has the planner revise it with the reason, then asks again;
 * - `reject()` without a reason drops the plan: nothing runs.
 */
export const answers = {
  approve: { allow: true, scope: "once" } as Approvals.Answer,
  edit: (feedback: string): Approvals.Answer => ({ allow: false, scope: "once", reason: `${EDIT_PREFIX} ${feedback}` }),
  reject: (reason?: string): Approvals.Answer =>
    reason === undefined ? { allow: false, scope: "once" } : { allow: false, scope: "once", reason }
}

/** Read a prompter's answer as a decision (see `answers`). */
export const decide = (answer: Approvals.Answer): Decision => {
  if (answer.allow) return { _tag: "approve" }
  const reason = answer.reason?.trim() ?? ""
  if (reason.toLowerCase().startsWith(EDIT_PREFIX)) {
    const feedback = reason.slice(EDIT_PREFIX.length).trim()
    if (feedback.length > 0) return { _tag: "edit", feedback }
  }
  return { _tag: "reject", reason: reason.length > 0 ? reason : undefined }
}

// ---------------------------------------------------------------------------------------------
// Folding the log
// ---------------------------------------------------------------------------------------------

export interface Snapshot {
  readonly agent: string
  readonly id: string
  readonly task: string
  readonly plan: Plan
  readonly version: number
  readonly status: Status
  /** Status of each step that started: `running`, `done`, `blocked`, `failed`, … */
  readonly steps: Readonly<Record<string, string>>
}

const decodePlan = Schema.decodeUnknownOption(Plan)

/** The latest plan in a log (of `agent`, or of any agent), with its status. */
export const fromEvents = (events: ReadonlyArray<Event.Envelope>, agent?: string): Option.Option<Snapshot> => {
  let snap: { -readonly [K in keyof Snapshot]: Snapshot[K] } | undefined
  for (const e of events) {
    if (agent !== undefined && e.agent !== agent) continue
    if (!e.type.startsWith("plan.")) continue
    const d = e.data as any
    if (e.type === "plan.proposed" || e.type === "plan.revised") {
      const plan = decodePlan(d?.plan)
      if (Option.isNone(plan)) continue
      snap = {
        agent: e.agent,
        id: String(d.id),
        task: e.type === "plan.proposed" ? String(d.task ?? "") : (snap?.task ?? ""),
        plan: plan.value,
        version: Number(d.version),
        status: "proposed",
        steps: {}
      }
      continue
    }
    if (!snap || d?.id !== snap.id || e.agent !== snap.agent) continue
    if (e.type === "plan.approval.answered" && d.decision === "approve") snap.status = "approved"
    else if (e.type === "plan.step.started") {
      snap.status = "running"
      snap.steps = { ...snap.steps, [d.step]: "running" }
    } else if (e.type === "plan.step.completed") snap.steps = { ...snap.steps, [d.step]: String(d.status) }
    else if (e.type === "plan.completed") snap.status = d.status as Status
  }
  return Option.fromNullable(snap)
}
