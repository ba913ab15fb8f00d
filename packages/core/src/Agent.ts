/**
 * The agent loop: prompt → model → tool calls → approvals → tools → results → … until the model
 * stops or a budget (turns, tokens, wall time) is reached.
 *
 * Every step is recorded through the `Recorder` (intent before effect), so the loop replays
 * exactly from its log and resumes after a crash. Hook points (`transformPrompt`,
 * `transformContext`, `beforeToolCall`, `afterToolCall`) come from the `Plugins` registry. Between
 * model calls the loop takes whatever arrived in its inbox (crew reports, steering messages).
 *
 * @example
 * ```ts
 * import { Agent } from "@musekit/core"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function* () {
 *   const agent = yield* Agent.make({ name: "main", instructions: "You are a coding agent." })
 *   const result = yield* agent.send("Make the failing test pass", { onText: (t) => Effect.sync(() => process.stdout.write(t)) })
 *   return result.status // "completed" | "budget" | "failed" | "interrupted"
 * })
 * ```
 */
import type { Prompt } from "@effect/ai"
import { Effect, type Either, Option, Ref } from "effect"
import * as Approvals from "./Approvals.js"
import type { InboxMessage } from "./Contract.js"
import type * as Event from "./Event.js"
import * as EventLog from "./EventLog.js"
import * as Model from "./Model.js"
import * as Plugin from "./Plugin.js"
import * as Recorder from "./Recorder.js"
import * as Stop from "./Stop.js"
import * as Tools from "./Tools.js"
import * as Workspace from "./Workspace.js"

export interface Budget {
  /** Model calls per `send`. */
  readonly turns?: number | undefined
  /** Total tokens (input + output) per `send`. */
  readonly tokens?: number | undefined
  /** Wall time per `send`, in milliseconds (measured on event times, so replay agrees). */
  readonly wallMs?: number | undefined
}

export interface Config {
  /** Agent id in the log: `main`, `worker-1`, … */
  readonly name: string
  readonly instructions: string
  /** Tool names this agent may use (`"*"`, the default, is every registered tool). */
  readonly tools?: ReadonlyArray<string> | "*" | undefined
  readonly budget?: Budget | undefined
  /** Extra tools only this agent has (e.g. crew tools). */
  readonly extraTools?: ReadonlyArray<Tools.Definition> | undefined
  /** Messages that arrive for this agent (checked before every model call). */
  readonly inbox?: Inbox | undefined
  /** A workspace other than the one in context (e.g. a worktree). */
  readonly workspace?: Workspace.Service | undefined
  /** Largest tool result kept inline in an event; larger ones go to the blob store. */
  readonly inlineResultBytes?: number | undefined
  /** Start from a saved state (`Agent.save` at an idle point, from a checkpoint) instead of empty. */
  readonly restore?: State | undefined
}

/** An agent's state between turns, as JSON data (kept in checkpoints). */
export interface State {
  readonly history: ReadonlyArray<Prompt.MessageEncoded>
  /** Leading history messages sent unchanged at the previous model call. */
  readonly stable: number
  readonly usage: Model.Usage
}

export type { InboxMessage } from "./Contract.js"

export interface Inbox {
  /** Take what is waiting, without blocking. */
  readonly take: Effect.Effect<Option.Option<InboxMessage>>
  /** Told of every delivery, live or replayed. */
  readonly delivered?: ((message: InboxMessage) => Effect.Effect<void>) | undefined
}

export type Status = "completed" | "budget" | "failed" | "interrupted"

export interface TurnResult {
  readonly status: Status
  readonly text: string
  readonly usage: Model.Usage
  readonly steps: number
  readonly toolCalls: number
  readonly reason?: string | undefined
}

export interface SendOptions {
  readonly attachments?: ReadonlyArray<Plugin.Attachment> | undefined
  /** Streamed model text, as it arrives (live only). */
  readonly onText?: ((delta: string) => Effect.Effect<void>) | undefined
  /** Streamed tool output, as it arrives (live only). */
  readonly onToolOutput?: ((callId: string, chunk: string) => Effect.Effect<void>) | undefined
  readonly budget?: Budget | undefined
  /**
   * Called before each step of the turn (before the budget check, the inbox and the model call),
   * when nothing of the turn is in flight: the point where a checkpoint may be taken mid-turn.
   */
  readonly atStep?: ((state: TurnState) => Effect.Effect<void>) | undefined
}

/** A turn between two steps, as JSON data (kept in checkpoints taken mid-turn; see `Agent.resume`). */
export interface TurnState {
  readonly startedAt: number
  readonly lastAt: number
  readonly budget: Budget
  readonly usage: Model.Usage
  readonly steps: number
  readonly toolCalls: number
  readonly text: string
  /** The event the next model request follows. */
  readonly parent: string | null
  readonly malformedRetries: number
  readonly overflowRetried: boolean
}

export interface Agent {
  readonly name: string
  readonly send: (
    input: string | ReadonlyArray<Prompt.UserMessagePartEncoded>,
    options?: SendOptions
  ) => Effect.Effect<TurnResult, Recorder.RecorderError>
  /** Go on with a turn from the state `atStep` was given (a turn restored from a checkpoint). */
  readonly resume: (state: TurnState, options?: SendOptions) => Effect.Effect<TurnResult, Recorder.RecorderError>
  readonly history: Effect.Effect<ReadonlyArray<Prompt.MessageEncoded>>
  readonly usage: Effect.Effect<Model.Usage>
  /** The state between turns (call it only when no turn is running). */
  readonly save: Effect.Effect<State>
  /**
   * Where the agent's last turn was when it was interrupted (`None` when it was not): `resume`
   * goes on with it from there.
   */
  readonly interrupted: Effect.Effect<Option.Option<TurnState>>
  /**
   * Go back to a conversation `save` gave earlier (a rewind): the history is replaced, the usage
   * spent so far stays. Call it only when no turn is running.
   */
  readonly reset: (state: State) => Effect.Effect<void>
}

/** A text as an event holds it: inline, or (when large) in the blob store with its size and first characters. */
export type TextData =
  | { readonly text: string }
  | { readonly blob: string; readonly bytes: number; readonly preview: string }

/** Texts larger than this many UTF-8 bytes go to the blob store (tool results too, by default). */
export const INLINE_BYTES = 32 * 1024

const PREVIEW_CHARS = 512

const encoder = new TextEncoder()

/** Whether `text` takes more than `limit` bytes in UTF-8 (without encoding it when it cannot). */
const longerThan = (text: string, limit: number) =>
  text.length > limit || (text.length * 3 > limit && encoder.encode(text).length > limit)

/** `text` as an event should hold it: inline up to `limit` bytes, else in the blob store (redacted like the log). */
export const storeText = (
  rec: Recorder.Service,
  text: string,
  limit = INLINE_BYTES
): Effect.Effect<TextData, Recorder.RecorderError> => {
  if (!longerThan(text, limit)) return Effect.succeed({ text })
  // the size and preview are those of the redacted text the store keeps, as a replay (which reads
  // the redacted blob back) finds them
  const redacted = rec.redact(text)
  return Effect.map(rec.putBlob(encoder.encode(text)), (blob) => ({
    blob,
    bytes: redacted === text ? encoder.encode(text).length : encoder.encode(redacted).length,
    preview: redacted.slice(0, PREVIEW_CHARS)
  }))
}

/** The text an event holds (see `storeText`). */
export const loadText = (rec: Recorder.Service, data: TextData): Effect.Effect<string, Recorder.RecorderError> =>
  "text" in data
    ? Effect.succeed(data.text)
    : Effect.map(rec.getBlob(data.blob), (bytes) => new TextDecoder().decode(bytes))

const INTERRUPTED_RESULT = "interrupted: the turn was stopped before this tool call finished; its effect may be partial"

/** The reply a model sees for a tool call the session stopped in the middle of. */
export const interruptedToolResult = (tool: string) => ({
  error: `interrupted: the session stopped while ${tool} was running, so its effect may be partial. Check the workspace before running it again.`
})

/** The reply a model sees for a tool call that was running when a stop was requested (`Stop`). */
export const stoppedToolResult = (tool: string, reason: string) => ({
  error: `interrupted (${reason}) while ${tool} was running, so its effect may be partial. Check the workspace before running it again.`
})

const resultOf = (isFailure: boolean, result: unknown): Plugin.ToolResult => ({ isFailure, result })

const textOf = (parts: ReadonlyArray<Prompt.UserMessagePartEncoded>) =>
  parts
    .filter((p): p is Prompt.TextPartEncoded => p.type === "text")
    .map((p) => p.text)
    .join("\n")

/**
 * The tool message for the calls of the last assistant message when it has none (the turn was
 * interrupted among them): the results of the calls that finished, an "interrupted" result for the others.
 */
const repairHistory = (
  history: Array<Prompt.MessageEncoded>,
  finished: ReadonlyArray<Prompt.ToolResultPartEncoded>
) => {
  const last = history[history.length - 1]
  if (last?.role !== "assistant" || typeof last.content === "string") return
  const calls = last.content.filter((p): p is Prompt.ToolCallPartEncoded => p.type === "tool-call")
  if (calls.length === 0) return
  history.push({
    role: "tool",
    content: calls.map(
      (c) =>
        finished.find((r) => r.id === c.id) ?? {
          type: "tool-result" as const,
          id: c.id,
          name: c.name,
          isFailure: true,
          result: { error: INTERRUPTED_RESULT },
          providerExecuted: false
        }
    )
  })
}

export const make = (
  config: Config
): Effect.Effect<
  Agent,
  never,
  Model.Model | Tools.Tools | Approvals.Approvals | Approvals.Prompter | Workspace.Workspace | Recorder.Recorder
> =>
  Effect.gen(function* () {
    const model = yield* Model.Model
    const registry = yield* Tools.Tools
    const approvals = yield* Approvals.Approvals
    const prompter = yield* Approvals.Prompter
    const workspace = config.workspace ?? (yield* Workspace.Workspace)
    const rec = yield* Recorder.Recorder
    const plugins = Option.getOrElse(yield* Effect.serviceOption(Plugin.Plugins), () => Plugin.empty)
    const stop = Option.getOrElse(yield* Effect.serviceOption(Stop.Stop), () => Stop.never)
    const agentName = config.name
    const inlineLimit = config.inlineResultBytes ?? INLINE_BYTES
    // what one tool result may show the model (the whole result is in the log either way)
    const resultBudget = model.contextWindow !== undefined ? Tools.resultBudget(model.contextWindow) : undefined

    const allTools = [...registry.list, ...plugins.tools, ...(config.extraTools ?? [])]
    const filtered =
      config.tools === undefined || config.tools === "*"
        ? allTools
        : allTools.filter(
            (t) =>
              (config.tools as ReadonlyArray<string>).includes(t.name) ||
              (config.extraTools ?? []).some((x) => x.name === t.name)
          )
    const tools = Tools.fromList(filtered)

    const history: Array<Prompt.MessageEncoded> = [...(config.restore?.history ?? [])]
    /** Results of the tool calls of the step in progress, until they go into the history together. */
    let stepResults: Array<Prompt.ToolResultPartEncoded> = []
    /** Where the turn in progress is (updated at each step); kept when the turn is interrupted. */
    let turnNow: TurnState | undefined
    let interruptedTurn: TurnState | undefined

    /**
     * Stop here if the log shows the turn was interrupted here (replaying), or a stop was requested
     * (live): the two always agree, because a live stop takes effect only at these points. A
     * request is not honoured while the agent still replays what the log holds.
     */
    const stopPoint = Effect.gen(function* () {
      const next = yield* rec.peek(agentName)
      if (Option.isSome(next)) {
        if (next.value.type === Recorder.INTERRUPTED) return yield* Recorder.interruptedAt(next.value)
        return
      }
      const requested = yield* stop.requested
      if (Option.isSome(requested)) {
        return yield* new Recorder.Interrupted({ seq: -1, agent: agentName, reason: requested.value })
      }
    })
    /** `effect`, unless a stop is requested first (live): then it is interrupted and the turn stops. */
    const stoppable = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | Recorder.Interrupted, R> =>
      Effect.flatMap(rec.replaying(agentName), (replaying) =>
        replaying
          ? effect
          : Effect.raceFirst(
              effect,
              Effect.flatMap(stop.await, (reason) =>
                Effect.fail(new Recorder.Interrupted({ seq: -1, agent: agentName, reason }))
              )
            )
      )
    /** Leading history messages that are the same objects as at the previous model call. */
    let stable = config.restore?.stable ?? 0
    const totalUsage = yield* Ref.make(config.restore?.usage ?? Model.emptyUsage)
    const record = (type: string, data: unknown, parent: string | null = null, durable = true) =>
      rec.append({ agent: agentName, type, data, parent }, undefined, { durable })

    /**
     * A call's summary, made from its parameters as the log keeps them (redacted): a replay, which
     * reads them back from the log, makes the same.
     */
    const summaryOf = (def: Tools.Definition, params: unknown) => {
      const json = JSON.stringify(params ?? null)
      const redacted = rec.redact(json)
      return def.summarize(redacted === json ? params : JSON.parse(redacted))
    }

    /** A path a tool names, normalized and relative to the workspace root (absolute when outside it). */
    const lexical = (p: string) =>
      Workspace.relativeTo(workspace.root, Workspace.normalize(p.startsWith("/") ? p : `${workspace.root}/${p}`))

    /** Decide whether a tool call may run; records the decision (and the question, if one was asked). */
    const approve = (def: Tools.Definition, params: unknown, callId: string, ctx: Tools.CallContext) =>
      Effect.gen(function* () {
        const paths = def.paths(params).map(lexical)
        const request: Approvals.Request = {
          agent: agentName,
          tool: def.name,
          effect: def.effect,
          summary: summaryOf(def, params),
          ...(def.command ? { command: def.command(params) } : {}),
          ...(paths.length > 0 ? { paths } : {}),
          ...(def.unsandboxed?.(params) ? { unsandboxed: true } : {})
        }
        const auto = yield* approvals.check(request)
        if (auto) {
          // durable together with the tool.started that follows
          yield* record("approval.decided", { callId, tool: def.name, summary: request.summary, ...auto }, null, false)
          return auto
        }
        const { value: answer } = yield* Recorder.stepWith<Approvals.Answer, Recorder.Interrupted, never>(rec, {
          agent: agentName,
          intent: {
            type: "approval.requested",
            data: { callId, tool: def.name, effect: def.effect, summary: request.summary }
          },
          // the preview (e.g. a diff) shows the files as they are now: an observation, not replayed
          observe: def.preview
            ? Effect.map(def.preview(params, ctx), (preview) => ({ preview: preview ?? null }))
            : undefined,
          run: (intent) =>
            Effect.gen(function* () {
              const preview = (intent.data as { observed?: { preview?: string | null } }).observed?.preview
              const shown = approvals.propose ? yield* approvals.propose(request) : undefined
              return yield* stoppable(
                prompter.ask({
                  ...request,
                  preview: preview ?? undefined,
                  ...(shown?.proposal ? { proposal: shown.proposal } : {}),
                  ...(shown && shown.warnings.length > 0 ? { warnings: shown.warnings } : {})
                })
              )
            }),
          outcome: (a) => ({
            type: "approval.answered",
            data: {
              callId,
              allow: a.allow,
              scope: a.scope,
              reason: a.reason ?? null,
              // the rule the person confirmed (null: none); once-answers store none and say nothing
              ...(a.scope === "once" ? {} : { rule: a.rule ?? null }),
              ...(a.unsandboxed ? { unsandboxed: true } : {})
            }
          }),
          outcomeTypes: ["approval.answered"],
          fromOutcome: (e) => {
            const d = e.data as any
            const rule: Approvals.Rule | undefined =
              d.rule ??
              // logs written before answers carried their rule stored the call's summary as the pattern
              (d.scope !== "once" && !("rule" in d)
                ? { tool: def.name, pattern: request.summary, action: d.allow ? "allow" : "deny", scope: d.scope }
                : undefined)
            return {
              allow: d.allow,
              scope: d.scope,
              reason: d.reason ?? undefined,
              ...(rule ? { rule } : {}),
              ...(d.unsandboxed === true ? { unsandboxed: true } : {})
            }
          }
        })
        const decision = yield* approvals.remember(request, answer)
        yield* record("approval.decided", { callId, tool: def.name, summary: request.summary, ...decision })
        return decision
      })

    /**
     * Why a write must not run although it was approved: a path it names leads (through a symlink,
     * or another spelling of the same file) to a protected path that the approval did not name.
     */
    const aliasRefusal = (named: ReadonlyArray<string>) =>
      Effect.gen(function* () {
        const real = workspace.real
        if (!real) return undefined
        for (const p of named) {
          const rel = lexical(p)
          if (Approvals.protectedRisk(rel) !== undefined) continue
          const target = yield* Effect.orElseSucceed(real(p), () => undefined)
          if (target !== undefined && target !== rel && Approvals.protectedRisk(target) !== undefined) {
            return `refused: ${p} leads to ${target}, a protected path (${Approvals.protectedRisk(target)!.replace(/^writes [^:]*: /, "")}). Nothing was written; name ${target} itself so that the user is asked.`
          }
        }
        return undefined
      })

    /** Content hashes of files a write tool will touch, with their bytes kept in the blob store. */
    const snapshot = (paths: ReadonlyArray<string>) =>
      Effect.gen(function* () {
        const out: Record<string, string | null> = {}
        for (const p of paths) {
          const bytes = yield* Effect.orElseSucceed(workspace.read(p), () => null)
          // kept exactly (a file holding a secret is sealed, not redacted): resume may have to put it back
          out[p] = bytes === null ? null : yield* Effect.orElseSucceed(rec.putBlob(bytes, { exact: true }), () => null)
        }
        return out
      })

    /**
     * Keep the content a file change left (hash `after`) in the blob store, before the
     * `file.changed` event that names it is recorded: the log then holds every file state it names,
     * so a workspace can be rebuilt from the base commit and the log on another machine (a cluster
     * runner taking the session over). Skipped when the file no longer holds that content. The
     * next write of the same file finds its "before" already stored, so this mostly moves a blob
     * write earlier rather than adding one.
     */
    const keepContent = (p: string, after: string) =>
      Effect.gen(function* () {
        const bytes = yield* Effect.orElseSucceed(workspace.read(p), () => null)
        if (bytes === null || (yield* EventLog.sha256Hex(bytes)) !== after) return
        yield* Effect.ignore(rec.putBlob(bytes, { exact: true }))
      })

    /**
     * A text part too large for the log as a reference to the blob store: its first characters
     * and, in `options.muse`, the blob and its size. The model gets the whole text (`Model` reads it
     * back); the log, the history and checkpoints hold only the reference.
     */
    const textRef = (part: Prompt.TextPartEncoded) =>
      Effect.map(storeText(rec, part.text, 0), (stored) => {
        const ref = stored as Extract<TextData, { blob: string }>
        const options = (part.options ?? {}) as Record<string, Record<string, unknown> | undefined>
        return {
          ...part,
          text: `${ref.preview}…`,
          options: { ...options, muse: { ...options.muse, blob: ref.blob, bytes: ref.bytes } }
        } as Prompt.TextPartEncoded
      })

    const encodeResult = (r: Plugin.ToolResult) =>
      Effect.gen(function* () {
        const json = JSON.stringify(r.result ?? null)
        if (json.length <= inlineLimit) return { isFailure: r.isFailure, result: r.result ?? null }
        const hash = yield* rec.putBlob(json)
        return { isFailure: r.isFailure, blob: hash, bytes: json.length, preview: json.slice(0, 512) }
      })

    /** `r` as the log keeps it: with what the redactor finds replaced. */
    const redactResult = (r: Plugin.ToolResult): Plugin.ToolResult => {
      const json = JSON.stringify(r.result ?? null)
      const redacted = rec.redact(json)
      return redacted === json ? r : resultOf(r.isFailure, JSON.parse(redacted))
    }

    const decodeResult = (data: any): Effect.Effect<Plugin.ToolResult, Recorder.RecorderError> =>
      data.blob
        ? Effect.map(rec.getBlob(data.blob), (bytes) =>
            resultOf(data.isFailure, JSON.parse(new TextDecoder().decode(bytes)))
          )
        : Effect.succeed(resultOf(data.isFailure, data.result))

    /** What a write tool's start records: fingerprints of its paths, and what the tool itself looks at. */
    const observeCall = (
      def: Tools.Definition,
      params: unknown,
      ctx: Tools.CallContext,
      paths: ReadonlyArray<string>
    ): Effect.Effect<Record<string, unknown>> =>
      Effect.gen(function* () {
        const observed: Record<string, unknown> = {}
        if (paths.length > 0) observed.fingerprint = yield* snapshot(paths)
        if (def.observe) {
          observed.state = yield* def
            .observe(params, ctx)
            .pipe(
              Effect.catchAllDefect((d) => Effect.succeed({ unobserved: d instanceof Error ? d.message : String(d) }))
            )
        }
        return observed
      })

    /**
     * Settle an interrupted call the tool's own way (`Tools.Definition.settle`): it looks at the
     * world and says done, rerun or interrupted. The outcome records which (`settled`).
     */
    const settleByTool = (def: Tools.Definition, params: unknown, ctx: Tools.CallContext, intent: Event.Envelope) =>
      Effect.gen(function* () {
        const observed = ((intent.data as any)?.observed as { state?: unknown } | undefined)?.state
        const settlement = yield* def.settle!(params, { ...ctx, observed }).pipe(
          Effect.map((s): Tools.Settlement | { readonly _tag: "failed"; readonly error: string } => s),
          Effect.catchAll((e) => Effect.succeed({ _tag: "failed" as const, error: e.message })),
          Effect.catchAllDefect((d) =>
            Effect.succeed({ _tag: "failed" as const, error: d instanceof Error ? d.message : String(d) })
          )
        )
        switch (settlement._tag) {
          case "done":
            return { raw: resultOf(false, settlement.result), settled: "done" as const }
          case "rerun":
            return {
              raw: yield* def.handler(params, ctx).pipe(
                Effect.map((r) => resultOf(false, r)),
                Effect.catchAll((e) =>
                  Effect.succeed(resultOf(true, { error: e.message, ...(e.data ? { data: e.data } : {}) }))
                ),
                Effect.catchAllDefect((d) =>
                  Effect.succeed(
                    resultOf(true, { error: `${def.name} crashed: ${d instanceof Error ? d.message : String(d)}` })
                  )
                )
              ),
              settled: "rerun" as const
            }
          case "interrupted":
            return {
              raw: resultOf(true, settlement.reason ? { error: settlement.reason } : interruptedToolResult(def.name)),
              settled: "interrupted" as const
            }
          case "failed":
            return {
              raw: resultOf(true, {
                error: `${interruptedToolResult(def.name).error} Looking at what it did failed: ${settlement.error}`
              }),
              settled: "interrupted" as const
            }
        }
      }).pipe(
        Effect.flatMap(({ raw, settled }) =>
          Effect.map(encodeResult(raw), (stored) => ({ raw, stored: { ...stored, settled } }))
        )
      )

    /** Run one tool call end to end; never fails for tool reasons (those go back to the model). */
    const runToolCall = (call: Model.ToolCall, options: SendOptions) =>
      Effect.gen(function* () {
        let ctx: Tools.CallContext = {
          agent: agentName,
          callId: call.id,
          workspace,
          progress: (chunk) => (options.onToolOutput ? options.onToolOutput(call.id, chunk) : Effect.void)
        }
        yield* stopPoint
        const reject = (reason: string) =>
          Effect.as(
            record("tool.rejected", { callId: call.id, tool: call.name, reason }),
            resultOf(true, { error: reason })
          )
        const def = tools.get(call.name)
        if (!def) {
          return yield* reject(
            `unknown tool ${call.name}; available tools: ${tools.list.map((t) => t.name).join(", ") || "none"}`
          )
        }
        const decoded = yield* Effect.either(Tools.decodeParams(def, call.params))
        if (decoded._tag === "Left") return yield* reject(decoded.left.message)
        let params = decoded.right
        const before = yield* plugins.beforeToolCall({ agent: agentName, callId: call.id, tool: def.name, params })
        if (before && "block" in before) return yield* reject(`blocked: ${before.block}`)
        if (before && "params" in before) {
          const again = yield* Effect.either(Tools.decodeParams(def, before.params))
          if (again._tag === "Left") return yield* reject(again.left.message)
          params = again.right
        }
        const decision = yield* approve(def, params, call.id, ctx)
        // only a person's "run unsandboxed" answer takes a call out of the OS sandbox
        if (decision.unsandboxed === true) ctx = { ...ctx, unsandboxed: true }
        if (!decision.allow) {
          const by =
            decision.by === "rule"
              ? `rule ${decision.rule}`
              : decision.by === "user"
                ? "the user"
                : `approval mode ${decision.mode}`
          return resultOf(true, {
            error: `denied by ${by}${decision.reason ? `: ${decision.reason}` : ""}. Do not retry the same call; ask the user or try another approach.`
          })
        }
        if (def.internal) {
          const started = yield* record("tool.started", {
            callId: call.id,
            tool: def.name,
            effect: def.effect,
            summary: summaryOf(def, params),
            params
          })
          const r = yield* def.handler(params, ctx).pipe(
            Effect.map((v) => resultOf(false, v)),
            Effect.catchAll((e) => Effect.succeed(resultOf(true, { error: e.message })))
          )
          yield* rec.append({
            agent: agentName,
            parent: started.id,
            type: "tool.completed",
            data: { callId: call.id, tool: def.name, isFailure: r.isFailure, result: r.result ?? null }
          })
          return yield* plugins.afterToolCall({ agent: agentName, callId: call.id, tool: def.name, params, result: r })
        }
        const paths = def.effect === "write" || def.effect === "exec" ? def.paths(params) : []
        // the result as it goes into the log: inline, or (when large) in the blob store
        const store = (r: Plugin.ToolResult) => Effect.map(encodeResult(r), (stored) => ({ raw: r, stored }))
        /** The default settlement: re-run reads and idempotent tools; judge a write by its fingerprints. */
        const settleByFingerprint = (intent: Event.Envelope) =>
          Effect.gen(function* () {
            if (def.effect === "read" || def.idempotent) return undefined
            const recorded = (intent.data as any)?.observed?.fingerprint as Record<string, string | null> | undefined
            if (def.effect === "write" && recorded) {
              const files = Object.keys(recorded)
              if (workspace.discardPartial) yield* workspace.discardPartial(files)
              const now = yield* workspace.fingerprint(files)
              if (files.every((p) => recorded[p] === now[p])) return undefined
              // The write may have happened. Put the files back as they were before it, run it
              // again, and keep the result only if it leaves exactly what was found: then the
              // outcome is the one the interrupted run would have recorded.
              const found = yield* Effect.forEach(files, (p) => Effect.orElseSucceed(workspace.read(p), () => null))
              const restored = yield* Effect.forEach(files, (p) =>
                recorded[p] === null
                  ? Effect.orElseSucceed(workspace.restore(p, null), () => false)
                  : rec.getBlob(recorded[p]!).pipe(
                      Effect.flatMap((bytes) => workspace.restore(p, bytes)),
                      Effect.orElseSucceed(() => false)
                    )
              )
              if (restored.every(Boolean)) {
                const again = yield* def.handler(params, ctx).pipe(
                  Effect.map((r) => resultOf(false, r)),
                  Effect.catchAll((e) => Effect.succeed(resultOf(true, { error: e.message })))
                )
                const after = yield* workspace.fingerprint(files)
                if (!again.isFailure && files.every((p) => after[p] === now[p])) return again
              }
              // Someone else changed the files: leave them as they were found.
              yield* Effect.forEach(files, (p, i) => Effect.ignore(workspace.restore(p, found[i]!)))
            }
            return resultOf(true, interruptedToolResult(def.name))
          }).pipe(Effect.flatMap((r) => (r === undefined ? Effect.succeed(undefined) : store(r))))
        const { value: completed, outcome } = yield* Recorder.stepWith<
          { readonly raw: Plugin.ToolResult; readonly stored: object },
          Recorder.RecorderError,
          never
        >(rec, {
          agent: agentName,
          intent: {
            type: "tool.started",
            data: {
              callId: call.id,
              tool: def.name,
              effect: def.effect,
              summary: summaryOf(def, params),
              params
            }
          },
          observe: paths.length > 0 || def.observe ? observeCall(def, params, ctx, paths) : undefined,
          // a read by this process's own code changes nothing: it need not wait for its intent to
          // reach the disk (a crash that loses the intent leaves the call unrecorded, and resume asks
          // again; invariant 5 re-runs reads). A tool must say so itself (`durableIntent: false`):
          // "read" alone may be another process's claim (an MCP server's annotations).
          durableIntent: def.effect !== "read" || def.durableIntent !== false,
          run: () =>
            Effect.flatMap(aliasRefusal(paths), (refusal) =>
              refusal !== undefined
                ? Effect.succeed(resultOf(true, { error: refusal }))
                : def.handler(params, ctx).pipe(
                    Effect.map((r) => resultOf(false, r)),
                    Effect.catchAll((e) =>
                      Effect.succeed(resultOf(true, { error: e.message, ...(e.data ? { data: e.data } : {}) }))
                    ),
                    Effect.catchAllDefect((d) =>
                      Effect.succeed(
                        resultOf(true, { error: `${def.name} crashed: ${d instanceof Error ? d.message : String(d)}` })
                      )
                    )
                  )
            ).pipe(
              // a stop interrupts the tool and settles it: the outcome says so, the turn stops after it
              (handled) =>
                Effect.raceFirst(
                  handled,
                  Effect.map(stop.await, (reason) => resultOf(true, stoppedToolResult(def.name, reason)))
                ),
              Effect.flatMap(store)
            ),
          outcome: (r) => ({ type: "tool.completed", data: { callId: call.id, tool: def.name, ...r.stored } }),
          outcomeTypes: ["tool.completed"],
          fromOutcome: (e) => Effect.map(decodeResult(e.data), (raw) => ({ raw, stored: e.data as object })),
          settle: (intent) => (def.settle ? settleByTool(def, params, ctx, intent) : settleByFingerprint(intent))
        })
        const raw = completed.raw
        const changes =
          (raw.result as any)?.changes ??
          (raw.result && (raw.result as any).path && "after" in (raw.result as any) ? [raw.result] : [])
        if (!raw.isFailure && Array.isArray(changes)) {
          for (const c of changes) {
            if (c && typeof c.path === "string") {
              if (typeof c.after === "string" && rec.mode !== "replay") yield* keepContent(c.path, c.after)
              yield* record(
                "file.changed",
                { callId: call.id, path: c.path, before: c.before ?? null, after: c.after ?? null },
                outcome.id,
                false
              )
            }
          }
        }
        // the agent goes on with the result as the log keeps it, redacted: a replay, which reads it back
        // from the log, then sees, sends and measures the same
        return yield* plugins.afterToolCall({
          agent: agentName,
          callId: call.id,
          tool: def.name,
          params,
          result: redactResult(raw)
        })
      })

    const budgetExceeded = (budget: Budget, steps: number, usage: Model.Usage, startedAt: number, now: number) => {
      if (budget.turns !== undefined && steps >= budget.turns)
        return `turn budget of ${budget.turns} model calls reached`
      if (budget.tokens !== undefined && usage.totalTokens >= budget.tokens) {
        return `token budget of ${budget.tokens} reached (${usage.totalTokens} used)`
      }
      if (budget.wallMs !== undefined && now - startedAt >= budget.wallMs) {
        return `time budget of ${Math.round(budget.wallMs / 1000)} s reached`
      }
      return undefined
    }

    const turn = (
      input: string | ReadonlyArray<Prompt.UserMessagePartEncoded>,
      options: SendOptions
    ): Effect.Effect<TurnResult, Recorder.RecorderError> =>
      Effect.gen(function* () {
        repairHistory(history, stepResults)
        stepResults = []
        const content = yield* Effect.forEach(
          typeof input === "string" ? [{ type: "text" as const, text: input }] : input,
          (part): Effect.Effect<Prompt.UserMessagePartEncoded, Recorder.RecorderError> =>
            part.type === "text" && longerThan(part.text, inlineLimit) ? textRef(part) : Effect.succeed(part)
        )
        const attachments = options.attachments ?? []
        const { value: ready, outcome: readyEvent } = yield* Recorder.stepWith<
          ReadonlyArray<Prompt.UserMessagePartEncoded>,
          never,
          never
        >(rec, {
          agent: agentName,
          intent: { type: "user.message", data: { text: textOf(content), content, attachments } },
          run: () => Effect.map(plugins.transformPrompt({ agent: agentName, content, attachments }), (r) => r.content),
          outcome: (c) => ({ type: "prompt.ready", data: { content: c } }),
          outcomeTypes: ["prompt.ready"],
          fromOutcome: (e) => (e.data as any).content
        })
        history.push({ role: "user", content: [...ready] })
        return yield* stepsOf(
          {
            startedAt: readyEvent.at,
            lastAt: readyEvent.at,
            budget: { ...config.budget, ...options.budget },
            usage: Model.emptyUsage,
            steps: 0,
            toolCalls: 0,
            text: "",
            parent: readyEvent.id,
            malformedRetries: 0,
            overflowRetried: false
          },
          options
        )
      })

    /** The steps of a turn, from `state` on, until the model stops or a budget is reached. */
    const stepsOf = (state: TurnState, options: SendOptions): Effect.Effect<TurnResult, Recorder.RecorderError> =>
      Effect.gen(function* () {
        const startedAt = state.startedAt
        const budget = state.budget
        let lastAt = state.lastAt
        let usage = state.usage
        let steps = state.steps
        let toolCalls = state.toolCalls
        let text = state.text
        let parent = state.parent
        let malformedRetries = state.malformedRetries
        let overflowRetried = state.overflowRetried
        const now = (): TurnState => ({
          startedAt,
          lastAt,
          budget,
          usage,
          steps,
          toolCalls,
          text,
          parent,
          malformedRetries,
          overflowRetried
        })
        repairHistory(history, stepResults)
        stepResults = []
        while (true) {
          turnNow = now()
          yield* stopPoint
          if (options.atStep) yield* options.atStep(turnNow)
          const exceeded = budgetExceeded(budget, steps, usage, startedAt, lastAt)
          if (exceeded) return { status: "budget" as const, text, usage, steps, toolCalls, reason: exceeded }
          const delivered = yield* Recorder.pollWith<InboxMessage>(rec, {
            agent: agentName,
            type: "inbox.delivered",
            take: config.inbox?.take ?? Effect.succeed(Option.none()),
            toData: (m) => m,
            fromData: (d) => d as InboxMessage
          })
          if (Option.isSome(delivered)) {
            const m = delivered.value.value
            if (config.inbox?.delivered) yield* config.inbox.delivered(m)
            history.push({ role: "user", content: [{ type: "text", text: m.text }] })
            lastAt = delivered.value.event.at
          }
          const compact = (force: boolean) =>
            Effect.gen(function* () {
              const context = yield* plugins.transformContext({
                agent: agentName,
                model: model.name,
                messages: history,
                system: config.instructions,
                force,
                generate: (r) =>
                  Effect.map(
                    model.generate({
                      agent: r.agent,
                      system: r.system,
                      messages: r.messages,
                      tools: [],
                      toolChoice: "none"
                    }),
                    (res) => ({ text: res.reply.text })
                  )
              })
              if (context !== history) {
                let same = 0
                while (same < context.length && same < history.length && context[same] === history[same]) same++
                stable = Math.min(stable, same)
                history.splice(0, history.length, ...context)
              }
            })
          yield* compact(overflowRetried)
          const result: Either.Either<Model.Result, Model.ModelError | Recorder.RecorderError> = yield* Effect.either(
            stoppable(
              model.generate(
                {
                  agent: agentName,
                  parent,
                  system: config.instructions,
                  messages: history,
                  tools: tools.list,
                  stablePrefix: stable
                },
                { onDelta: options.onText }
              )
            )
          )
          if (result._tag === "Left") {
            if (result.left._tag === "ModelError" && result.left.malformed && malformedRetries < 2) {
              malformedRetries++
              steps++
              history.push({
                role: "user",
                content: [
                  {
                    type: "text",
                    text: `Your previous reply could not be used: ${result.left.message}. Available tools: ${
                      tools.list.map((t) => t.name).join(", ") || "none"
                    }. Reply again.`
                  }
                ]
              })
              continue
            }
            if (result.left._tag === "ModelError" && result.left.overflow && !overflowRetried) {
              overflowRetried = true
              continue
            }
            if (result.left._tag === "ModelError") {
              return { status: "failed" as const, text, usage, steps, toolCalls, reason: result.left.message }
            }
            return yield* Effect.fail(result.left)
          }
          overflowRetried = false
          stable = history.length
          const reply: Model.Reply = result.right.reply
          const event: Event.Envelope = result.right.event
          lastAt = event.at
          parent = event.id
          steps++
          usage = Model.addUsage(usage, reply.usage)
          yield* Ref.update(totalUsage, (u) => Model.addUsage(u, reply.usage))
          history.push(Model.assistantMessage(reply))
          if (reply.text) text = reply.text
          turnNow = now()
          if (reply.toolCalls.length === 0) {
            return { status: "completed" as const, text, usage, steps, toolCalls }
          }
          for (const call of reply.toolCalls) {
            toolCalls++
            const r = yield* runToolCall(call, options)
            stepResults.push({
              type: "tool-result",
              id: call.id,
              name: call.name,
              isFailure: r.isFailure,
              result: (resultBudget ? Tools.fitResult(tools.get(call.name), r.result, resultBudget) : r.result) as any,
              providerExecuted: false
            })
            turnNow = now()
          }
          history.push({ role: "tool", content: stepResults })
          stepResults = []
        }
      })

    /** Record how a turn ended (or that it was interrupted). */
    const finish = (
      run: Effect.Effect<TurnResult, Recorder.RecorderError>
    ): Effect.Effect<TurnResult, Recorder.RecorderError> =>
      Effect.gen(function* () {
        interruptedTurn = undefined
        const outcome = yield* Effect.either(run)
        if (outcome._tag === "Left") {
          if (outcome.left._tag === "Interrupted") {
            const reason = outcome.left.reason ?? "interrupted"
            yield* record(Recorder.INTERRUPTED, { reason })
            interruptedTurn = turnNow
            turnNow = undefined
            return {
              status: "interrupted" as const,
              text: interruptedTurn?.text ?? "",
              usage: interruptedTurn?.usage ?? Model.emptyUsage,
              steps: interruptedTurn?.steps ?? 0,
              toolCalls: interruptedTurn?.toolCalls ?? 0,
              reason
            }
          }
          return yield* Effect.fail(outcome.left)
        }
        turnNow = undefined
        const r = outcome.right
        yield* record("turn.completed", {
          status: r.status,
          text: r.text,
          usage: r.usage,
          steps: r.steps,
          toolCalls: r.toolCalls,
          reason: r.reason ?? null
        })
        return r
      }).pipe(Effect.onInterrupt(() => Effect.ignore(record(Recorder.INTERRUPTED, { reason: "interrupted" }))))

    const send: Agent["send"] = (input, options = {}) => finish(turn(input, options))
    const resume: Agent["resume"] = (state, options = {}) => finish(stepsOf(state, options))

    return {
      name: agentName,
      send,
      resume,
      history: Effect.sync(() => [...history]),
      usage: Ref.get(totalUsage),
      save: Effect.map(Ref.get(totalUsage), (usage) => {
        // the tool results of an interrupted step go into the history now, as the next turn would put them
        repairHistory(history, stepResults)
        stepResults = []
        return { history: [...history], stable, usage }
      }),
      interrupted: Effect.sync(() => Option.fromNullable(interruptedTurn)),
      reset: (state) =>
        Effect.sync(() => {
          history.splice(0, history.length, ...state.history)
          // the model checks the prompt it gets against its previous one; nothing is known to be the same
          stable = 0
        })
    } satisfies Agent
  })
