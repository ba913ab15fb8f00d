/**
 * The `skills` plugin: `/plan`, `/grill`, `/goal` and the skills of `SKILL.md` files.
 *
 * - `/plan [--grill] <task>` — a planner agent (`planner`, read-only tools) turns the task into a
 *   structured `Plan` through its internal tool `submit_plan`. The plan is shown, and nothing runs
 *   until a person approves it through the `Prompter` (`plan.approval.requested` →
 *   `plan.approval.answered`); an edit or a rejection with a reason has the planner revise it and
 *   asks again. Approved, its steps run in dependency order through the agent the skill runs for
 *   (`plan.step.started` / `plan.step.completed`), independent steps on the crew when there is one.
 *   `--grill` grills the plan before asking. `/plan` without a task asks again about the current plan.
 * - `/grill [--rounds N] [plan]` — a reviewer agent (`grill`) that did not write the plan attacks
 *   the current plan (or the one given) and the planner revises it until no blocking finding is
 *   left or the round limit (default 3) is reached.
 * - `/goal <objective> [--check "<command>"] …` — works until the goal holds (see `Goal`).
 *
 * All three record what they do as events of the agent they run for, so sessions replay exactly
 * and resume where they stopped. The plan and the goal are pinned in the agent's context.
 *
 * @example
 * ```ts
 * import { Plugin, Skill } from "@musekit/core"
 * import { SkillsPlugin } from "@musekit/plugin-skills"
 * import { Effect } from "effect"
 *
 * const setup = Effect.gen(function* () {
 *   const { plugin, errors } = yield* SkillsPlugin.load({ projectDir: process.cwd(), goal: { maxTurns: 100 } })
 *   for (const e of errors) console.error(e.message)
 *   return Plugin.layer([plugin])          // registers /plan, /grill, /goal and the SKILL.md skills
 * })
 * // in a program: Skill.makeRegistry(plugin.skills).invoke("/plan add a --json flag"),
 * // with Skill.SkillContext provided ({ agent, crew, output })
 * ```
 */
import { type Agent, Plugin, Recorder, Skill } from "@musekit/core"
import { Effect, Schema } from "effect"
import * as Goal from "./Goal.js"
import { passThrough, skillError } from "./internal/common.js"
import * as GoalRun from "./internal/goal.js"
import * as Planning from "./internal/planning.js"
import * as SkillState from "./internal/state.js"
import { stateOf } from "./internal/state.js"
import * as Plan from "./Plan.js"
import * as Prompts from "./Prompts.js"
import * as SkillFiles from "./SkillFiles.js"

/** A helper agent's settings. */
export interface HelperOptions {
  /** Agent name in the log (for an agent other than `main`, it is prefixed: `worker-1/planner`). */
  readonly name?: string | undefined
  /** Replace the system prompt (default: the package's `prompts/<helper>.md`). */
  readonly instructions?: string | undefined
  /** Tools it may use (default the read-only `read_file`, `list_files`, `grep`). */
  readonly tools?: ReadonlyArray<string> | "*" | undefined
  /** Per turn (default 40 model calls for the planner and the reviewer, 20 for the judge). */
  readonly budget?: Agent.Budget | undefined
}

export interface PlanOptions {
  readonly planner?: HelperOptions | undefined
  /** Revisions after edits and rejections before the plan is dropped (default 3). */
  readonly maxRevisions?: number | undefined
  /** Grill every plan before asking for approval (default false; `/plan --grill` does it once). */
  readonly grill?: boolean | undefined
  /** Run independent steps on the crew when the skill context has one (default true). */
  readonly parallel?: boolean | undefined
  /** The crew role steps are delegated to (default `worker`). */
  readonly crewRole?: string | undefined
  /** A step's verify command taking longer is killed and the step fails (default 10 min). */
  readonly verifyTimeoutMs?: number | undefined
  /** Where verify commands run (default the workspace root). */
  readonly cwd?: string | undefined
}

export interface GrillOptions {
  readonly reviewer?: HelperOptions | undefined
  /** Review rounds (default 3). */
  readonly rounds?: number | undefined
}

export interface GoalOptions {
  readonly judge?: HelperOptions | undefined
  /** Default budget; `/goal --max-…` flags override it. */
  readonly maxAttempts?: number | undefined
  readonly maxTurns?: number | undefined
  readonly maxTokens?: number | undefined
  readonly maxTimeMs?: number | undefined
  /** A check command taking longer is killed and counts as failed (default 10 min). */
  readonly checkTimeoutMs?: number | undefined
  /** Characters of check output kept in the event and shown to the agent (default 3000). */
  readonly outputTailChars?: number | undefined
  /** Where check commands run (default the workspace root). */
  readonly cwd?: string | undefined
  /** Replace the text that opens a goal (`{{check}}` is replaced by how the goal is checked). */
  readonly prompt?: string | undefined
}

export interface Options {
  readonly plan?: PlanOptions | undefined
  readonly grill?: GrillOptions | undefined
  readonly goal?: GoalOptions | undefined
  /** Skills from `SKILL.md` files (`SkillFiles.load`), registered besides the built-in ones. */
  readonly files?: SkillFiles.Loaded | ReadonlyArray<Skill.Skill> | undefined
  /** Leave out built-in skills, e.g. `{ goal: false }`. */
  readonly builtins?: { readonly plan?: boolean; readonly grill?: boolean; readonly goal?: boolean } | undefined
}

export const DEFAULTS = {
  readTools: ["read_file", "list_files", "grep"] as ReadonlyArray<string>,
  /** Model calls per turn of the planner and the reviewer, and of the judge. */
  helperTurns: 40,
  judgeTurns: 20,
  maxRevisions: 3,
  rounds: 3,
  crewRole: "worker",
  maxAttempts: 10,
  maxTurns: 200,
  checkTimeoutMs: 10 * 60_000,
  outputTailChars: 3000
} as const

const helper = (
  o: HelperOptions | undefined,
  name: string,
  instructions: () => string,
  turns: number
): Planning.Helper => ({
  name: o?.name ?? name,
  instructions: o?.instructions ?? instructions(),
  tools: o?.tools ?? DEFAULTS.readTools,
  budget: o?.budget ?? { turns }
})

const planningSettings = (options: Options): Planning.Settings => ({
  planner: helper(options.plan?.planner, "planner", Prompts.planner, DEFAULTS.helperTurns),
  reviewer: helper(options.grill?.reviewer, "grill", Prompts.grill, DEFAULTS.helperTurns),
  maxRevisions: options.plan?.maxRevisions ?? DEFAULTS.maxRevisions,
  rounds: options.grill?.rounds ?? DEFAULTS.rounds,
  grillBeforeApproval: options.plan?.grill ?? false,
  parallel: options.plan?.parallel ?? true,
  crewRole: options.plan?.crewRole ?? DEFAULTS.crewRole,
  verifyTimeoutMs: options.plan?.verifyTimeoutMs ?? DEFAULTS.checkTimeoutMs,
  outputTailChars: DEFAULTS.outputTailChars,
  cwd: options.plan?.cwd
})

/** Ends a skill on `Stopped` (an interrupted turn) with a result instead of a failure. */
const stoppable = <A, E, R>(name: string, eff: Effect.Effect<A, E | Planning.Stopped, R>) =>
  Effect.gen(function* () {
    const ctx = yield* Skill.SkillContext
    return yield* eff.pipe(
      Effect.catchIf(
        (e): e is Planning.Stopped => (e as { _tag?: string })?._tag === "Stopped",
        (e) => Effect.as(ctx.output(`/${name} stopped: ${e.reason}.`), { status: "interrupted" as const })
      )
    )
  })

export interface PlanResult {
  readonly id: string
  readonly version: number
  readonly status: Plan.Status
  readonly plan: Plan.Plan
  readonly done?: number | undefined
  readonly reason?: string | undefined
}

const flag = (text: string, name: string) => {
  const re = new RegExp(`(^|\\s)${name}(?=\\s|$)`)
  return re.test(text) ? { on: true, rest: text.replace(re, " ").trim() } : { on: false, rest: text.trim() }
}

/** The `/plan` skill. */
export const plan = (options: Options = {}): Skill.Skill<string, any> => {
  const settings = planningSettings(options)
  return Skill.make({
    name: "plan",
    description:
      "Turn a task into a structured plan (steps, files, risks, how each step is verified); it runs only after you approve it. `/plan --grill <task>` has a reviewer grill it first; `/plan` alone asks again about the current plan.",
    source: "@musekit/plugin-skills",
    run: (args: string) =>
      passThrough(
        stoppable(
          "plan",
          Effect.gen(function* () {
            const ctx = yield* Skill.SkillContext
            const st = yield* stateOf(ctx.agent)
            const g = flag(args, "--grill")
            const task = g.rest
            let cur = st.current
            if (task === "") {
              if (!cur) return yield* skillError("plan", "give a task: /plan <task>")
              if (cur.status === "running" || cur.status === "done" || cur.status === "failed") {
                return yield* skillError(
                  "plan",
                  `the current plan ${cur.id} has already run (${cur.status}); give a new task: /plan <task>`
                )
              }
              yield* ctx.output(Plan.render(cur.plan, { version: cur.version }))
            } else {
              cur = yield* Planning.propose(ctx, settings, task)
            }
            if (g.on || settings.grillBeforeApproval) yield* Planning.grill(ctx, settings, cur, settings.rounds)
            const approved = yield* Planning.approve(ctx, settings, cur)
            if (!approved) {
              return { id: cur.id, version: cur.version, status: cur.status, plan: cur.plan } satisfies PlanResult
            }
            const outcome = yield* Planning.execute(ctx, settings, cur)
            return {
              id: cur.id,
              version: cur.version,
              status: cur.status,
              plan: cur.plan,
              done: outcome.done,
              reason: outcome.reason
            } satisfies PlanResult
          })
        )
      )
  })
}

const decodePlanJson = Schema.decodeUnknownEither(Schema.parseJson(Plan.Plan))

/** The `/grill` skill. */
export const grill = (options: Options = {}): Skill.Skill<string, any> => {
  const settings = planningSettings(options)
  return Skill.make({
    name: "grill",
    description:
      "Have a reviewer attack the current plan (missing steps, wrong assumptions, untested paths, rollback, risk) and revise it until no blocking finding is left. `/grill --rounds N [plan]`.",
    source: "@musekit/plugin-skills",
    run: (args: string) =>
      passThrough(
        stoppable(
          "grill",
          Effect.gen(function* () {
            const ctx = yield* Skill.SkillContext
            const st = yield* stateOf(ctx.agent)
            let text = args.trim()
            let rounds = settings.rounds
            const m = /(^|\s)--rounds(?:=|\s+)(\S+)/.exec(text)
            if (m) {
              const n = Number(m[2])
              if (!Number.isInteger(n) || n < 1) {
                return yield* skillError("grill", `--rounds needs a whole number of at least 1, got "${m[2]}"`)
              }
              rounds = n
              text = text.replace(m[0], " ").trim()
            }
            let cur = st.current
            if (text !== "") {
              const asJson = decodePlanJson(text)
              if (asJson._tag === "Right" && Plan.validate(asJson.right).length === 0) {
                cur = yield* Planning.adopt(ctx, "(the plan given to /grill)", asJson.right)
              } else {
                const structured = yield* Planning.propose(
                  ctx,
                  settings,
                  `Turn this existing plan into a structured plan, keeping its substance (do not improve it yet; it will be reviewed):\n\n${text}`
                )
                cur = structured
              }
            }
            if (!cur) {
              return yield* skillError(
                "grill",
                "there is no plan to grill yet: run /plan <task> first, or give the plan: /grill <plan>"
              )
            }
            const result = yield* Planning.grill(ctx, settings, cur, rounds)
            if (cur.status === "proposed" || cur.status === "rejected") {
              yield* ctx.output(`Run /plan to approve and run version ${cur.version} of ${cur.id}.`)
            }
            return { id: cur.id, version: cur.version, plan: cur.plan, ...result }
          })
        )
      )
  })
}

/** The `/goal` skill. */
export const goal = (options: Options = {}): Skill.Skill<Goal.Args, any> => {
  const o = options.goal ?? {}
  const settings: GoalRun.Settings = {
    judge: helper(o.judge, "goal-judge", Prompts.judge, DEFAULTS.judgeTurns),
    goalPrompt: o.prompt ?? Prompts.goal(),
    maxAttempts: o.maxAttempts ?? DEFAULTS.maxAttempts,
    maxTurns: o.maxTurns ?? DEFAULTS.maxTurns,
    maxTokens: o.maxTokens,
    maxTimeMs: o.maxTimeMs,
    checkTimeoutMs: o.checkTimeoutMs ?? DEFAULTS.checkTimeoutMs,
    outputTailChars: o.outputTailChars ?? DEFAULTS.outputTailChars,
    cwd: o.cwd
  }
  return Skill.make({
    name: "goal",
    description: `Work until a goal holds: a command that must pass, or a criterion a judge decides on; within a budget of attempts, model calls, tokens and time. ${Goal.usage}`,
    source: "@musekit/plugin-skills",
    args: Goal.ArgsFromString,
    run: (args: Goal.Args) =>
      passThrough(
        stoppable(
          "goal",
          Effect.gen(function* () {
            const ctx = yield* Skill.SkillContext
            return yield* GoalRun.run(ctx, settings, args)
          })
        )
      )
  })
}

/** The built-in skills and those of `options.files` (a file skill cannot replace a built-in one). */
export const skills = (options: Options = {}): ReadonlyArray<Skill.Skill> => {
  const builtins = [
    options.builtins?.plan === false ? undefined : plan(options),
    options.builtins?.grill === false ? undefined : grill(options),
    options.builtins?.goal === false ? undefined : goal(options)
  ].filter((s): s is Skill.Skill => s !== undefined)
  const files = options.files === undefined ? [] : "skills" in options.files ? options.files.skills : options.files
  const taken = new Set(builtins.map((s) => s.name))
  return [...builtins, ...files.filter((s) => !taken.has(s.name))]
}

/**
 * The plugin (named `skills`). Its state between user inputs (the current plan, counters, the
 * planner's, reviewer's and judge's conversations) is kept in checkpoints.
 */
export const make = (options: Options = {}): Plugin.Plugin =>
  Plugin.make({
    name: "skills",
    skills: skills(options),
    checkpoint: {
      save: Effect.flatMap(Recorder.Recorder, (rec) => SkillState.save(rec)),
      restore: (state) => Effect.map(Recorder.Recorder, (rec) => SkillState.restore(rec, state))
    }
  })

/**
 * Load the `SKILL.md` files (`SkillFiles.load`) and make the plugin. Files that could not be used
 * are returned as `errors`, including files named like a built-in skill.
 */
export const load = (
  options: Options & SkillFiles.LoadOptions
): Effect.Effect<{
  readonly plugin: Plugin.Plugin
  readonly files: SkillFiles.Loaded
  readonly errors: ReadonlyArray<SkillFiles.SkillFileError>
}> =>
  Effect.gen(function* () {
    const files = yield* SkillFiles.load(options)
    const builtin = new Set(["plan", "grill", "goal"].filter((n) => (options.builtins as any)?.[n] !== false))
    const clashes = files.files
      .filter((f) => builtin.has(f.name))
      .map(
        (f) =>
          new SkillFiles.SkillFileError({
            file: f.displayPath,
            reason: `the name "${f.name}" is taken by the built-in /${f.name}; rename the skill to use it`
          })
      )
    return { plugin: make({ ...options, files }), files, errors: [...files.errors, ...clashes] }
  })
