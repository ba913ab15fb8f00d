/**
 * The coding tools as `muse` runs them, and the replay of a session with them.
 *
 * An approval question records the tool's preview (the diff of an edit). A preview is computed
 * from the files as they are, so after the edit ran — when a session is resumed or replayed — it
 * would come out different and the replay would diverge. Here a preview already recorded in the
 * log is served from the log instead of being computed again.
 */

import { Approvals, type Event, type EventLog, Model, Plugin, Session, Tools, Workspace } from "@musekit/core"
import { CodingTools, EventLogFile, SessionRuntime, ShellParser } from "@musekit/node"
import { Effect, Layer, Option } from "effect"

const key = (agent: string, callId: string) => `${agent}\u0000${callId}`

/** Coding tools whose previews come from `events` where the log has them. */
export const make = (events: ReadonlyArray<Event.Envelope>): ReadonlyArray<Tools.Definition> => {
  const recorded = new Map<string, string | undefined>()
  for (const e of events) {
    if (e.type !== "approval.requested") continue
    const d = (e.data ?? {}) as { callId?: string; preview?: string | null }
    if (typeof d.callId === "string") recorded.set(key(e.agent, d.callId), d.preview ?? undefined)
  }
  return CodingTools.make().map((def) => {
    const preview = def.preview
    if (!preview) return def
    return {
      ...def,
      preview: (params: unknown, ctx: Tools.CallContext) => {
        const k = key(ctx.agent, ctx.callId)
        return recorded.has(k) ? Effect.succeed(recorded.get(k)) : preview(params, ctx)
      }
    }
  })
}

/** Re-run a recorded session (no model, no side effects); `verify` fails at the first divergence. */
export const replay = (options: {
  readonly session: string
  readonly store: EventLog.StoreService
  readonly events: ReadonlyArray<Event.Envelope>
  readonly verify: boolean
  readonly plugins: ReadonlyArray<Plugin.PluginInput>
}) =>
  Effect.gen(function* () {
    const cfg = yield* SessionRuntime.configOf(options.events)
    const io: SessionRuntime.Io = {
      input: Effect.succeed(Option.none()),
      prompter: { ask: () => Effect.dieMessage("a person was asked during replay") }
    }
    const services: SessionRuntime.Services = {
      languageModel: Model.layerLanguageModelForbidden,
      plugins: options.plugins
    }
    const layer = Layer.mergeAll(
      Model.layer(cfg.model, { contextWindow: cfg.contextWindow }).pipe(Layer.provide(services.languageModel)),
      Layer.succeed(Approvals.Prompter, io.prompter),
      Approvals.layer({ mode: cfg.approvalMode, rules: cfg.rules, shell: ShellParser.parser }),
      Workspace.layerLexical(cfg.root),
      Layer.succeed(Tools.Tools, Tools.fromList(make(options.events))),
      Plugin.layer(options.plugins)
    )
    return yield* Session.replay(SessionRuntime.program(cfg, io, services).pipe(Effect.provide(layer)), {
      events: options.events,
      verify: options.verify,
      getBlob: options.store.getBlob,
      redactor: EventLogFile.envRedactor()
    })
  })
