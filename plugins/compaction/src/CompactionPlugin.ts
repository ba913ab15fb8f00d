/**
 * The `compaction` plugin: keeps every agent's context inside the model's window on runs of
 * thousands of tool calls.
 *
 * Before each model call (its `transformContext` hook) it counts the tokens of the system prompt
 * and the messages with gpt-tokenizer. When they reach `trigger` (default 75 %) of the window —
 * counting a reserve for the reply — or when the provider has just refused the request as too
 * long, it shrinks the context to `target` (default 50 %):
 *
 * 1. **Masking.** Tool outputs older than the last `keepObservations` turns and bigger than
 *    `maskMinTokens` are replaced by a one-line stub naming the call, the size and the blob hash
 *    of the full output (stored with `Recorder.putBlob`). The tool call and its result part stay.
 * 2. **Summary.** If that is not enough, older turns are folded into a structured summary (goal,
 *    progress, decisions, constraints from the user, files touched, open todos, last errors)
 *    written by the model as agent `<agent>/compactor` with the prompt in `prompts/summary.md`.
 *    The new context is the summary (a user message), the pinned messages verbatim, then the most
 *    recent turns verbatim. If the summary call fails, the turns are dropped with a mechanical
 *    summary instead; the turn never fails because of compaction.
 *
 * A tool call is never separated from its result. Pinned messages always survive: the first user
 * message, every message with `options.muse.pin` set (skills pin plans, goals and todos this
 * way) and every message whose text contains `<pinned>`. Each compaction is recorded as a
 * `context.compacted` event (tokens before and after, what was masked, summarized or dropped,
 * the summary), so replay reproduces it exactly and `muse log` can show what was removed.
 *
 * @example
 * ```ts
 * import { Plugin } from "@musekit/core"
 * import { ModelInfo } from "@musekit/models"
 * import { CompactionPlugin } from "@musekit/plugin-compaction"
 *
 * const plugins = Plugin.layer([
 *   CompactionPlugin.make({ contextWindow: ModelInfo.contextWindow, trigger: 0.8 })
 * ])
 * // an agent's message pinned for good:
 * // { role: "user", content: "Plan: …", options: { muse: { pin: true } } }
 * ```
 */
import type { Prompt } from "@effect/ai"
import { type Event, Plugin, Recorder } from "@musekit/core"
import { Effect, Option, Schema } from "effect"
import { compact, needsCompaction, type Settings } from "./internal/compact.js"
import { defaultIsWriteTool, PIN_MARKER } from "./internal/context.js"
import { summary as summaryPromptText } from "./internal/prompts.js"
import * as Tokens from "./Tokens.js"

/** Window used when neither `contextWindow` nor the model table knows the model. */
export const DEFAULT_CONTEXT_WINDOW = 128_000

/** Type of the event recorded for each compaction. */
export const EVENT_TYPE = "context.compacted"

/** The marker that pins a message by its text. */
export const PINNED_MARKER = PIN_MARKER

/** The compactor's system prompt (the text of `prompts/summary.md`). */
export const summaryPrompt: string = summaryPromptText

export interface Options {
  /**
   * The model's context window in tokens, or a function of the `provider/model` name (e.g.
   * `ModelInfo.contextWindow` from `@musekit/models`). Default `DEFAULT_CONTEXT_WINDOW`.
   */
  readonly contextWindow?: number | ((model: string) => number | undefined) | undefined
  /** Compact when system prompt + messages + reply reserve exceed this share of the window. Default 0.75. */
  readonly trigger?: number | undefined
  /** Shrink to this share of the window (reserve included). Default 0.5. */
  readonly target?: number | undefined
  /** Tokens kept free for the reply (and tool definitions). Default 10 % of the window, 512 to 16,000. */
  readonly reserveTokens?: number | undefined
  /** Tool outputs of the last this many turns are never masked. Default 3. */
  readonly keepObservations?: number | undefined
  /** Only tool outputs (and tool call arguments) bigger than this many tokens are masked. Default 200. */
  readonly maskMinTokens?: number | undefined
  /** Length limit of the summary. Default 10 % of the window, 400 to 4,000. */
  readonly maxSummaryTokens?: number | undefined
  /**
   * Tools that write files (their `path`-like arguments are listed under "Files touched"). Default:
   * names like `write_file`, `edit_file`, `apply_patch`, `create_*`, `delete_*`, `rename_*`.
   * Results that report `changes: [{ path }]` count whatever the tool is called.
   */
  readonly writeTools?: ReadonlyArray<string> | ((tool: string) => boolean) | undefined
  /** Agents to compact (names or a predicate). Default: every agent. */
  readonly agents?: ReadonlyArray<string> | ((agent: string) => boolean) | undefined
  /** Replace the compactor's system prompt. */
  readonly summaryPrompt?: string | undefined
}

/** Options that cannot work together (e.g. a target above the trigger). */
export class InvalidOptions extends Schema.TaggedError<InvalidOptions>("@musekit/plugin-compaction/InvalidOptions")(
  "InvalidOptions",
  { message: Schema.String }
) {}

/** What was removed from the context, one entry per observation, turn or cut. */
export const Dropped = Schema.Struct({
  /** `masked`: an output replaced by a stub; `summarized`: a turn folded into the summary;
   * `dropped`: a turn removed with a mechanical summary; `clipped`: an output cut to its start. */
  kind: Schema.Literal("masked", "summarized", "dropped", "clipped"),
  what: Schema.String,
  /** sha256 of the full content in the session's blob store. */
  blob: Schema.optional(Schema.String)
})
export type Dropped = typeof Dropped.Type

/** Data of a `context.compacted` event. */
export const Compacted = Schema.Struct({
  /** 1 for the agent's first compaction, 2 for the next, … */
  compaction: Schema.Number,
  model: Schema.String,
  window: Schema.Number,
  /** The provider had refused the previous request as too long. */
  force: Schema.Boolean,
  /** Tokens of system prompt + messages before and after. */
  before: Schema.Number,
  after: Schema.Number,
  /** Tool outputs and arguments replaced by stubs. */
  masked: Schema.Number,
  /** Turns folded into the summary (or dropped, see `fallback`). */
  summarized: Schema.Number,
  dropped: Schema.Array(Dropped),
  /** The summary that now opens the context, if one was written. */
  summary: Schema.NullOr(Schema.String),
  /** Why the summary is mechanical (the summary model failed), or null. */
  fallback: Schema.NullOr(Schema.String)
})
export type Compacted = typeof Compacted.Type

/** The compactions recorded in a log, in order (for `muse log`, `/compact` and tests). */
export const fromEvents = (
  events: ReadonlyArray<Event.Envelope>
): Array<{ readonly agent: string; readonly seq: number; readonly data: Compacted }> =>
  events.flatMap((e) => {
    if (e.type !== EVENT_TYPE) return []
    const data = Schema.decodeUnknownOption(Compacted)(e.data)
    return Option.isSome(data) ? [{ agent: e.agent, seq: e.seq, data: data.value }] : []
  })

/** The token budget the plugin works with for a model. */
export interface Budget {
  readonly window: number
  /** Compaction starts above this many tokens (reserve included). */
  readonly triggerTokens: number
  /** …and shrinks the context to this many (reserve included). */
  readonly targetTokens: number
  readonly reserveTokens: number
  readonly maxSummaryTokens: number
}

const clamp = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x))

const windowOf = (options: Options, model: string): number => {
  const w = options.contextWindow
  const n = typeof w === "function" ? w(model) : w
  return typeof n === "number" && Number.isFinite(n) && n > 0 ? Math.floor(n) : DEFAULT_CONTEXT_WINDOW
}

/** The budget for `model` under `options`. */
export const budgetFor = (options: Options, model: string): Budget => {
  const window = windowOf(options, model)
  const reserveTokens = options.reserveTokens ?? clamp(Math.round(window * 0.1), 512, 16_000)
  return {
    window,
    triggerTokens: Math.floor(window * (options.trigger ?? 0.75)),
    targetTokens: Math.floor(window * (options.target ?? 0.5)),
    reserveTokens: Math.min(reserveTokens, Math.floor(window / 4)),
    maxSummaryTokens: options.maxSummaryTokens ?? clamp(Math.round(window * 0.1), 400, 4_000)
  }
}

const check = (options: Options) => {
  const trigger = options.trigger ?? 0.75
  const target = options.target ?? 0.5
  const bad = (message: string) => {
    throw new InvalidOptions({ message: `compaction plugin: ${message}` })
  }
  if (!(trigger > 0 && trigger <= 1)) bad(`trigger must be in (0, 1], got ${trigger}`)
  if (!(target > 0 && target < trigger)) bad(`target must be above 0 and below trigger (${trigger}), got ${target}`)
  if (typeof options.contextWindow === "number" && !(options.contextWindow > 0)) {
    bad(`contextWindow must be positive, got ${options.contextWindow}`)
  }
  for (const k of ["reserveTokens", "keepObservations", "maskMinTokens", "maxSummaryTokens"] as const) {
    const v = options[k]
    if (v !== undefined && !(Number.isFinite(v) && v >= 0)) bad(`${k} must be a number >= 0, got ${v}`)
  }
}

const predicate = (
  list: ReadonlyArray<string> | ((name: string) => boolean) | undefined,
  fallback: (name: string) => boolean
): ((name: string) => boolean) =>
  list === undefined ? fallback : typeof list === "function" ? list : (name) => list.includes(name)

/**
 * The plugin. Throws `InvalidOptions` for options that cannot work. State (how many times each
 * agent was compacted) is kept per session: a replay of the session starts from scratch, as the
 * live run did.
 */
export const make = (options: Options = {}): Plugin.Plugin => {
  check(options)
  const counter = Tokens.makeCounter()
  const prompt = options.summaryPrompt ?? summaryPromptText
  const isWriteTool = predicate(options.writeTools, defaultIsWriteTool)
  const compacts = predicate(options.agents, () => true)
  // compactions per agent, per session (keyed by the session's recorder)
  const sessions = new WeakMap<object, Map<string, number>>()

  const settingsFor = (model: string): { readonly budget: Budget; readonly settings: Settings } => {
    const budget = budgetFor(options, model)
    return {
      budget,
      settings: {
        window: budget.window,
        trigger: budget.triggerTokens / budget.window,
        target: budget.targetTokens / budget.window,
        reserve: budget.reserveTokens,
        keepObservations: options.keepObservations ?? 3,
        maskMinTokens: options.maskMinTokens ?? 200,
        maxSummaryTokens: budget.maxSummaryTokens,
        isWriteTool,
        summaryPrompt: prompt
      }
    }
  }

  // Most model calls are within the budget: that is decided without entering `compact`.
  const transformContext = (input: Plugin.ContextInput) =>
    Effect.suspend(() =>
      compacts(input.agent)
        ? Effect.flatMap(Effect.serviceOption(Recorder.Recorder), (recorder) => {
            if (Option.isNone(recorder)) {
              return Effect.dieMessage(
                "the compaction plugin needs the Recorder: run the agent program with Session.run, Session.replay or Session.resume"
              )
            }
            const { budget, settings } = settingsFor(input.model)
            return needsCompaction(input, settings, counter)
              ? compactAndRecord(input, recorder.value, budget, settings)
              : Effect.succeed(input.messages)
          })
        : Effect.succeed(input.messages)
    )

  const compactAndRecord = (input: Plugin.ContextInput, rec: Recorder.Service, budget: Budget, settings: Settings) =>
    Effect.gen(function* () {
      const started = performance.now()
      const outcome = yield* compact(input, settings, { counter, putBlob: (data) => rec.putBlob(data) })
      if (!outcome) return input.messages
      let perAgent = sessions.get(rec)
      if (!perAgent) sessions.set(rec, (perAgent = new Map()))
      const n = (perAgent.get(input.agent) ?? 0) + 1
      perAgent.set(input.agent, n)
      const r = outcome.report
      const data: Compacted = {
        compaction: n,
        model: input.model,
        window: budget.window,
        force: input.force,
        before: r.before,
        after: r.after,
        masked: r.masked,
        summarized: r.summarized,
        dropped: r.dropped.map((d) =>
          d.blob ? { kind: d.kind, what: d.what, blob: d.blob } : { kind: d.kind, what: d.what }
        ),
        summary: r.summary,
        fallback: r.fallback
      }
      // the time taken is an observation (kept in the log, not compared on replay)
      yield* rec.append(
        { agent: input.agent, type: EVENT_TYPE, parent: null, data },
        Effect.sync(() => ({ ms: Math.round((performance.now() - started) * 10) / 10 }))
      )
      return outcome.messages
    })

  return Plugin.make({
    name: "compaction",
    // the compactions so far per agent, which number the next one
    checkpoint: {
      save: Effect.map(Recorder.Recorder, (rec) => Object.fromEntries(sessions.get(rec) ?? [])),
      restore: (state) =>
        Effect.map(Recorder.Recorder, (rec) => {
          sessions.set(rec, new Map(Object.entries(state as Record<string, number>)))
        })
    },
    hooks: {
      transformContext: {
        // after other context transforms, so it sees (and budgets) everything that will be sent
        order: "post",
        // Recorder failures (a replay divergence, an interrupted turn, the end of a replayed log)
        // must reach the session as they are, so the failure channel is passed through untyped.
        handler: transformContext as unknown as (
          input: Plugin.ContextInput
        ) => Effect.Effect<ReadonlyArray<Prompt.MessageEncoded>, never, never>
      }
    }
  })
}
