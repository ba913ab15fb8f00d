import type { Prompt } from "@effect/ai"
import { Agent, type Event, Recorder, Tools, Workspace } from "@musekit/core"
import { Effect, Schema } from "effect"
import * as Goal from "../Goal.js"
import * as Prompts from "../Prompts.js"
import { clip, formatDuration, formatTokens, helperName, record, tail } from "./common.js"
import { type Ctx, type Helper, pinnedPart, Stopped } from "./planning.js"
import { type State, stateOf, type Verdict } from "./state.js"

export interface Settings {
  readonly judge: Helper
  readonly goalPrompt: string
  readonly maxAttempts: number
  readonly maxTurns: number
  readonly maxTokens: number | undefined
  readonly maxTimeMs: number | undefined
  readonly checkTimeoutMs: number
  readonly outputTailChars: number
  readonly cwd: string | undefined
}

export interface Result {
  readonly goal: string
  readonly status: "achieved" | "budget" | "failed"
  readonly attempts: number
  readonly reason: string
  readonly turns: number
  readonly tokens: number
}

interface Check {
  readonly passed: boolean
  /** For the agent and the user: what the check showed. */
  readonly report: string
  readonly short: string
}

const submitVerdictTool = (st: State) =>
  Tools.make({
    name: "submit_verdict",
    description:
      "Give your verdict on the goal: met only when the criterion clearly holds now, otherwise not-met, with the reasoning (what you checked, what is missing).",
    parameters: {
      verdict: Schema.Literal("met", "not-met"),
      reasoning: Schema.String.pipe(Schema.minLength(1))
    },
    effect: "read",
    durableIntent: false,
    internal: true,
    summarize: ({ verdict }) => `submit_verdict ${verdict}`,
    handler: (v) =>
      Effect.sync(() => {
        st.submittedVerdict = v
        return { received: v.verdict, next: "Answer with one short sentence." }
      })
  })

const hasVerdict = (st: State) => st.submittedVerdict !== undefined
const takeVerdict = (st: State): Verdict | undefined => {
  const v = st.submittedVerdict
  st.submittedVerdict = undefined
  return v
}

const judgeOf = (ctx: Ctx, settings: Settings) =>
  Effect.gen(function* () {
    const st = yield* stateOf(ctx.agent)
    if (!st.judge) {
      st.judge = yield* Agent.make({
        name: helperName(ctx.agent.name, settings.judge.name),
        instructions: settings.judge.instructions,
        tools: settings.judge.tools,
        budget: settings.judge.budget,
        extraTools: [submitVerdictTool(st)],
        restore: st.restored.judge
      })
    }
    return st.judge
  })

const fence = (text: string) => `\`\`\`\n${text.trimEnd()}\n\`\`\``

/** Work on `args.objective` until it holds, the budget runs out, or the agent fails. */
export const run = (ctx: Ctx, settings: Settings, args: Goal.Args) =>
  Effect.gen(function* () {
    const st = yield* stateOf(ctx.agent)
    const owner = ctx.agent.name
    st.goals++
    const goal = `goal-${st.goals}`
    const budget = {
      attempts: args.maxAttempts ?? settings.maxAttempts,
      turns: args.maxTurns ?? settings.maxTurns,
      tokens: args.maxTokens ?? settings.maxTokens,
      timeMs: args.maxTimeMs ?? settings.maxTimeMs
    }
    const command = args.check
    const criterion = args.criterion ?? args.objective
    const cwd = settings.cwd ?? (yield* Workspace.Workspace).root
    const started = yield* record(owner, "goal.started", {
      goal,
      objective: args.objective,
      check: command !== undefined ? { kind: "command", command } : { kind: "judged", criterion },
      budget: {
        attempts: budget.attempts,
        turns: budget.turns,
        tokens: budget.tokens ?? null,
        timeMs: budget.timeMs ?? null
      }
    })
    let lastAt = started.at
    let turns = 0
    let tokens = 0
    let attempts = 0
    const seen = (e: Event.Envelope) => {
      lastAt = Math.max(lastAt, e.at)
      return e
    }
    const elapsed = () => lastAt - started.at
    const used = () => `${turns} model calls, ${formatTokens(tokens)} tokens, ${formatDuration(elapsed())}`

    const commandCheck = (cmd: string, attempt: number) =>
      Effect.gen(function* () {
        const { value, outcome } = yield* Recorder.step<Goal.CommandResult, never, never>({
          agent: owner,
          intent: { type: "goal.check.started", data: { goal, attempt, kind: "command", command: cmd } },
          run: () => Goal.runCommand({ command: cmd, cwd, timeoutMs: settings.checkTimeoutMs }),
          outcome: (r) => ({
            type: "goal.check.completed",
            data: {
              goal,
              attempt,
              kind: "command",
              command: cmd,
              passed: r.exitCode === 0,
              exitCode: r.exitCode,
              timedOut: r.timedOut,
              durationMs: r.durationMs,
              output: tail(r.output, settings.outputTailChars)
            }
          }),
          outcomeTypes: ["goal.check.completed"],
          fromOutcome: (e) => {
            const d = e.data as any
            return { exitCode: d.exitCode, output: d.output, timedOut: d.timedOut, durationMs: d.durationMs }
          }
        })
        seen(outcome)
        const d = outcome.data as { output: string }
        const passed = value.exitCode === 0
        const status = value.timedOut
          ? `timed out after ${formatDuration(settings.checkTimeoutMs)}`
          : `exit ${value.exitCode ?? "none"}`
        return {
          passed,
          short: passed ? `\`${cmd}\` passes` : `\`${cmd}\` fails (${status})`,
          report: passed
            ? `The check \`${cmd}\` passes.`
            : `The check \`${cmd}\` fails (${status}). The end of its output:\n${fence(d.output)}`
        } satisfies Check
      })

    const judgedCheck = (attempt: number, report: string) =>
      Effect.gen(function* () {
        seen(yield* record(owner, "goal.check.started", { goal, attempt, kind: "judged", criterion }))
        const judge = yield* judgeOf(ctx, settings)
        st.submittedVerdict = undefined
        const ask = `Objective: ${args.objective}\nSuccess criterion: ${criterion}\n\nThe agent has finished attempt ${attempt}. Its report:\n${
          report.trim() === "" ? "(no report)" : report
        }\n\nDecide whether the criterion holds now, then call submit_verdict.`
        let r = yield* judge.send(ask)
        turns += r.steps
        tokens += r.usage.totalTokens
        if (r.status === "interrupted") return yield* new Stopped({ reason: "the judge's turn was interrupted" })
        if (!hasVerdict(st) && r.status === "completed") {
          r = yield* judge.send("You did not give a verdict. Call submit_verdict now.")
          turns += r.steps
          tokens += r.usage.totalTokens
          if (r.status === "interrupted") return yield* new Stopped({ reason: "the judge's turn was interrupted" })
        }
        const v = takeVerdict(st) ?? {
          verdict: "not-met" as const,
          reasoning: `the judge gave no verdict (its turn ended with status ${r.status}${r.reason ? `: ${r.reason}` : ""})`
        }
        seen(
          yield* record(owner, "goal.check.completed", {
            goal,
            attempt,
            kind: "judged",
            criterion,
            passed: v.verdict === "met",
            verdict: v.verdict,
            reasoning: v.reasoning,
            judge: judge.name
          })
        )
        return {
          passed: v.verdict === "met",
          short: v.verdict === "met" ? "the judge says the goal is met" : "the judge says the goal is not met yet",
          report:
            v.verdict === "met"
              ? `The judge says the goal is met: ${v.reasoning}`
              : `The judge says the goal is not met yet: ${v.reasoning}`
        } satisfies Check
      })

    const finish = (status: Result["status"], reason: string) =>
      Effect.gen(function* () {
        yield* record(owner, "goal.completed", {
          goal,
          status,
          attempts,
          reason,
          turns,
          tokens,
          elapsedMs: elapsed()
        })
        const head =
          status === "achieved"
            ? `Goal achieved after ${attempts} attempt(s): ${reason}.`
            : status === "budget"
              ? `Goal stopped, budget exhausted: ${reason}.`
              : `Goal failed: ${reason}.`
        yield* ctx.output(`${head} (${used()})`)
        return { goal, status, attempts, reason, turns, tokens } satisfies Result
      })

    const exhausted = (): string | undefined => {
      if (attempts >= budget.attempts) return `all ${budget.attempts} attempts are used`
      if (turns >= budget.turns) return `the budget of ${budget.turns} model calls is used up`
      if (budget.tokens !== undefined && tokens >= budget.tokens) {
        return `the budget of ${formatTokens(budget.tokens)} tokens is used up`
      }
      if (budget.timeMs !== undefined && elapsed() >= budget.timeMs) {
        return `the time budget of ${formatDuration(budget.timeMs)} is used up`
      }
      return undefined
    }

    const howChecked =
      command !== undefined
        ? `The goal holds when the command \`${command}\` exits with status 0 in the workspace root. It is run for you after each attempt.`
        : `The goal holds when a judge, who reads the workspace and your report, decides that this criterion is met: ${criterion}`
    yield* ctx.output(
      `Goal ${goal}: ${args.objective}\n${
        command !== undefined ? `check: ${command}` : `judged: ${criterion}`
      }\nbudget: ${budget.attempts} attempts, ${budget.turns} model calls${
        budget.tokens !== undefined ? `, ${formatTokens(budget.tokens)} tokens` : ""
      }${budget.timeMs !== undefined ? `, ${formatDuration(budget.timeMs)}` : ""}`
    )

    let last: Check | undefined
    if (command !== undefined) {
      last = yield* commandCheck(command, 0)
      if (last.passed) return yield* finish("achieved", `${last.short} already, before any attempt`)
      yield* ctx.output(`Before the first attempt: ${last.short}.`)
    }

    while (true) {
      const out = exhausted()
      if (out !== undefined) {
        const after = attempts >= budget.attempts ? "" : ` after ${attempts} attempt(s)`
        return yield* finish("budget", `${out}${after}${last ? `; ${last.short}` : ""}`)
      }
      attempts++
      seen(yield* record(owner, "goal.attempt.started", { goal, attempt: attempts }))
      const left = [
        `${budget.attempts - attempts} more attempt(s) after this one`,
        `${budget.turns - turns} model calls`,
        ...(budget.tokens !== undefined ? [`${formatTokens(budget.tokens - tokens)} tokens`] : []),
        ...(budget.timeMs !== undefined ? [formatDuration(budget.timeMs - elapsed())] : [])
      ].join(", ")
      const status = last ? `\n\n${last.report}` : ""
      const content: Array<Prompt.UserMessagePartEncoded> =
        attempts === 1
          ? [
              pinnedPart(
                "goal",
                `Goal (${goal}): ${args.objective}\n\n${Prompts.fill(settings.goalPrompt, { check: howChecked })}`
              ),
              { type: "text", text: `Attempt 1 of the goal. Budget left: ${left}.${status}` }
            ]
          : [
              {
                type: "text",
                text: `Attempt ${attempts} of the goal "${args.objective}". Budget left: ${left}.${status}\n\nContinue working towards the goal.`
              }
            ]
      const r = yield* ctx.agent.send(content, {
        ...ctx.sendOptions,
        budget: {
          ...ctx.sendOptions?.budget,
          turns: budget.turns - turns,
          tokens: budget.tokens !== undefined ? budget.tokens - tokens : ctx.sendOptions?.budget?.tokens,
          wallMs: budget.timeMs !== undefined ? budget.timeMs - elapsed() : ctx.sendOptions?.budget?.wallMs
        }
      })
      turns += r.steps
      tokens += r.usage.totalTokens
      seen(
        yield* record(owner, "goal.attempt.completed", {
          goal,
          attempt: attempts,
          status: r.status,
          turns: r.steps,
          tokens: r.usage.totalTokens,
          text: clip(r.text, 2000)
        })
      )
      if (r.status === "interrupted") {
        yield* finish("failed", `attempt ${attempts} was interrupted`)
        return yield* new Stopped({ reason: "the turn was interrupted" })
      }
      if (r.status === "failed") return yield* finish("failed", `attempt ${attempts} failed: ${r.reason ?? "unknown"}`)
      last = command !== undefined ? yield* commandCheck(command, attempts) : yield* judgedCheck(attempts, r.text)
      if (last.passed) return yield* finish("achieved", last.short)
      yield* ctx.output(`Goal ${goal}, attempt ${attempts}: ${last.short}. Used so far: ${used()}.`)
    }
  })
