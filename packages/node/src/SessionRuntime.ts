/**
 * A whole agent session on a Node machine: the main agent, the crew, skills and the coding tools
 * over a real workspace, driven by user input and recorded in the session's log.
 *
 * The session program takes each user input as a recorded `user.input` event, runs it (a task for
 * the main agent, a `/skill`, or `/approve <mode>`), lets the crew finish and deliver its reports,
 * and asks for the next input. Because inputs are events, `replay` re-runs a session with no input
 * source at all, and `resume` continues one after a crash: it replays to the end of the log and
 * then asks for new input (or finishes the turn that was cut short).
 *
 * @example
 * ```ts
 * import { SessionRuntime } from "@musekit/node"
 *
 * const config = SessionRuntime.config({ root: process.cwd(), model: "openai/gpt-4.1", approvalMode: "auto-edit" })
 * // yield* SessionRuntime.start({ config, session, languageModel, io, dir })
 * ```
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import type { LanguageModel } from "@effect/ai"
import {
  Agent,
  Approvals,
  Checkpoint,
  Crew,
  Event,
  EventLog,
  Model,
  Plugin,
  Recorder,
  Rewind,
  Session,
  Skill,
  Stop,
  Tools,
  Workspace
} from "@musekit/core"
import { Effect, Either, Layer, Option, Schema } from "effect"
import * as CodingTools from "./CodingTools.js"
import * as EventLogFile from "./EventLogFile.js"
import * as Sandbox from "./Sandbox.js"
import * as ShellParser from "./ShellParser.js"
import * as WorkspaceNode from "./WorkspaceNode.js"

/** Everything that decides how a session behaves; recorded in `session.started` so replay uses the same. */
export const Config = Schema.Struct({
  title: Schema.String,
  root: Schema.String,
  model: Schema.String,
  approvalMode: Approvals.Mode,
  rules: Schema.Array(Approvals.Rule),
  /** The full system prompt of the main agent (base instructions plus the project's AGENTS.md). */
  instructions: Schema.String,
  crew: Schema.Boolean,
  budget: Schema.Struct({
    turns: Schema.optional(Schema.Number),
    tokens: Schema.optional(Schema.Number),
    wallMs: Schema.optional(Schema.Number)
  }),
  /**
   * Names of the plugins the session runs with, so a replay or a resume can put the same set
   * together (absent in sessions that did not say).
   */
  plugins: Schema.optional(Schema.Array(Schema.String)),
  /**
   * The model's context window in tokens, as the session was started with (from a flag, a config
   * file, the model table or the model's server), so a replay or a resume budgets the context the
   * same way without asking anyone (absent in sessions that did not say). Each tool result shows the
   * model at most a tenth of it (`Tools.resultBudget`); absent, results reach the model whole.
   */
  contextWindow: Schema.optional(Schema.Number),
  /**
   * The OS sandbox commands run in (mode, allowed hosts, more writable or hidden paths). A resume
   * uses it again; a replay runs no command, so it needs no sandbox. Absent in sessions recorded
   * before there was one: they resume with the default, `workspace-write`.
   */
  sandbox: Schema.optional(Sandbox.Settings),
  /**
   * What plugins found in the world when the session started, by plugin name (the tools each MCP
   * server offered, say): a replay or a resume builds those plugins from this record instead of
   * asking the world again, so the session sees the same tools.
   */
  discovered: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  /** The session this one was forked from, and the seq of the parent's log it starts from. */
  fork: Schema.optional(Schema.Struct({ session: Schema.String, seq: Schema.Number }))
})
export type Config = typeof Config.Type

export const baseInstructions = [
  "You are muse, a coding agent working in the user's repository.",
  "Read before you change; make the smallest change that does the job; run the tests that cover it.",
  "Use the tools: read_file, write_file, edit_file, list_files, grep, run_shell.",
  "When a task splits into independent parts, delegate them to crew members (delegate) and keep working;",
  "their reports reach you between steps. Finish with a short summary of what changed and how you checked it."
].join(" ")

/** The project's `AGENTS.md`, if any, appended to the base instructions. */
export const instructionsFor = (root: string, extra?: string): string => {
  const parts = [baseInstructions]
  const agentsMd = path.join(root, "AGENTS.md")
  if (fs.existsSync(agentsMd)) parts.push(`Project instructions (AGENTS.md):\n${fs.readFileSync(agentsMd, "utf8")}`)
  if (extra) parts.push(extra)
  return parts.join("\n\n")
}

/** Project approval rules, from `.muse/permissions.json` (`{ "rules": [...] }`). */
export const projectRulesFile = (root: string) => path.join(root, ".muse", "permissions.json")

export class ConfigError extends Schema.TaggedError<ConfigError>("@musekit/node/ConfigError")("ConfigError", {
  file: Schema.String,
  message: Schema.String
}) {}

export const loadProjectRules = (root: string): Effect.Effect<ReadonlyArray<Approvals.Rule>, ConfigError> =>
  Effect.gen(function* () {
    const file = projectRulesFile(root)
    if (!fs.existsSync(file)) return []
    const text = fs.readFileSync(file, "utf8")
    const json = yield* Effect.try({
      try: () => JSON.parse(text) as unknown,
      catch: (e) => new ConfigError({ file, message: `${file} is not valid JSON: ${(e as Error).message}` })
    })
    const decoded = yield* Schema.decodeUnknown(Schema.Struct({ rules: Schema.Array(Approvals.Rule) }))(json).pipe(
      Effect.mapError((e) => new ConfigError({ file, message: `${file}: ${e.message}` }))
    )
    return decoded.rules
  })

const persistRule = (root: string) => (rule: Approvals.Rule) =>
  Effect.sync(() => {
    const file = projectRulesFile(root)
    let rules: Array<unknown> = []
    try {
      rules = (JSON.parse(fs.readFileSync(file, "utf8")) as { rules: Array<unknown> }).rules ?? []
    } catch {}
    if (rules.some((r) => JSON.stringify(r) === JSON.stringify(rule))) return
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, `${JSON.stringify({ rules: [...rules, rule] }, null, 2)}\n`)
  })

export const config = (options: {
  readonly root: string
  readonly model: string
  readonly approvalMode?: Approvals.Mode | undefined
  readonly rules?: ReadonlyArray<Approvals.Rule> | undefined
  readonly instructions?: string | undefined
  readonly crew?: boolean | undefined
  readonly budget?: Agent.Budget | undefined
  readonly title?: string | undefined
  /** Names of the plugins the session runs with (recorded; see `Config.plugins`). */
  readonly plugins?: ReadonlyArray<string> | undefined
  /** The model's context window in tokens (recorded; see `Config.contextWindow`). */
  readonly contextWindow?: number | undefined
  /** The OS sandbox (recorded; see `Config.sandbox`); default `workspace-write`. */
  readonly sandbox?: Sandbox.Settings | undefined
  /** What plugins found when the session started (recorded; see `Config.discovered`). */
  readonly discovered?: Readonly<Record<string, unknown>> | undefined
}): Config => ({
  title: options.title ?? "",
  root: path.resolve(options.root),
  model: options.model,
  approvalMode: options.approvalMode ?? "auto-edit",
  rules: [...(options.rules ?? [])],
  instructions: options.instructions ?? instructionsFor(options.root),
  crew: options.crew ?? true,
  budget: {
    ...(options.budget?.turns !== undefined ? { turns: options.budget.turns } : {}),
    ...(options.budget?.tokens !== undefined ? { tokens: options.budget.tokens } : {}),
    ...(options.budget?.wallMs !== undefined ? { wallMs: options.budget.wallMs } : {})
  },
  ...(options.plugins !== undefined ? { plugins: [...options.plugins] } : {}),
  ...(options.contextWindow !== undefined ? { contextWindow: options.contextWindow } : {}),
  sandbox: options.sandbox ?? Sandbox.defaultSettings,
  ...(options.discovered !== undefined ? { discovered: { ...options.discovered } } : {})
})

/** How the session talks to a person (or a script). Nothing here is recorded; the events are. */
export interface Io {
  /** The next user input; `None` ends the session. Asked only when the log has no more inputs. */
  readonly input: Effect.Effect<Option.Option<string>>
  readonly prompter: Approvals.PrompterService
  readonly onText?: ((agent: string, delta: string) => Effect.Effect<void>) | undefined
  readonly onToolOutput?: ((callId: string, chunk: string) => Effect.Effect<void>) | undefined
  readonly onEvent?: ((event: Event.Envelope) => Effect.Effect<void>) | undefined
  /** Text for the user's eyes (skills use it). */
  readonly output?: ((text: string) => Effect.Effect<void>) | undefined
  readonly onTurn?: ((result: Agent.TurnResult) => Effect.Effect<void>) | undefined
  /** Told how a resume starts, before it replays anything. */
  readonly onResume?: ((info: ResumeInfo) => Effect.Effect<void>) | undefined
  /**
   * Notices for the main agent from outside the conversation (e.g. that the session moved to
   * another machine and what did not come along): each is delivered between its steps, like a
   * crew report, and recorded, so a replay sees it too. Asked only live.
   */
  readonly notices?: Effect.Effect<Option.Option<string>> | undefined
  /**
   * The session's stop button (Ctrl-C, SIGINT, SIGTERM): a request stops the main agent's turn and
   * every crew member's; reports that come after it wait for the next input.
   */
  readonly stop?: Stop.Service | undefined
}

/** Who notices come from in the agent's inbox. */
export const NOTICE_FROM = "muse"

/** What a notice's text starts with in the conversation: it comes from muse, not from the user. */
export const NOTICE_PREFIX = "[muse] "

/** The main agent's inbox: the session's notices first, then what the crew reports. */
const mainInbox = (io: Io, crew: Agent.Inbox | undefined): Agent.Inbox | undefined => {
  const notices = io.notices
  if (!notices) return crew
  let n = 0
  return {
    take: Effect.flatMap(notices, (text) =>
      Option.isSome(text)
        ? Effect.succeed(Option.some({ id: `notice-${++n}`, from: NOTICE_FROM, text: `${NOTICE_PREFIX}${text.value}` }))
        : (crew?.take ?? Effect.succeed(Option.none()))
    ),
    delivered: (message) => (message.from === NOTICE_FROM || !crew?.delivered ? Effect.void : crew.delivered(message))
  }
}

/** How a resume starts. */
export interface ResumeInfo {
  /** The seq the session goes on live from (the log's length when it was opened). */
  readonly nextSeq: number
  /** Seq of the checkpoint restored, or `null` when the whole log is replayed. */
  readonly checkpoint: number | null
  /** Events replayed before the session goes on live. */
  readonly replaying: number
  /** Why the checkpoint file was not used, if there was one. */
  readonly ignored: string | null
}

export interface Services {
  readonly languageModel: Layer.Layer<LanguageModel.LanguageModel>
  readonly plugins?: ReadonlyArray<Plugin.PluginInput> | undefined
  /** Tools instead of the built-in coding tools. */
  readonly tools?: ReadonlyArray<Tools.Definition> | undefined
  readonly toolOptions?: CodingTools.Options | undefined
  /** Options of the OS sandbox (paths muse keeps read-only or hidden: its config, its state). */
  readonly sandbox?: Sandbox.Options | undefined
}

/** A summary of a finished program. */
export interface Outcome {
  readonly turns: ReadonlyArray<Agent.TurnResult>
  readonly usage: Model.Usage
}

/** The session's state between user inputs, as JSON data (what a checkpoint keeps). */
export interface State {
  readonly config: Config
  readonly main: Agent.State
  readonly model: unknown
  readonly approvals: unknown
  readonly crew: Crew.State | null
  readonly plugins: Record<string, unknown>
  /** The sandbox mode (changed by `/sandbox <mode>`), when the session has a sandbox. */
  readonly sandbox?: Sandbox.Mode | undefined
  /** Taken mid-task: the user input whose turn was going on, and where that turn was. */
  readonly turn?: { readonly input: string; readonly state: Agent.TurnState } | undefined
}

export interface ProgramOptions {
  /**
   * The session's events before a seq, for `/rewind <target>` (it plans from the log); without
   * it, a rewind is refused with a message.
   */
  readonly eventsBefore?:
    | ((seq: number) => Effect.Effect<ReadonlyArray<Event.Envelope>, EventLog.EventLogError>)
    | undefined
  /** Go on from a checkpoint's state instead of starting the session (its earlier events are not replayed). */
  readonly restore?: State | undefined
  /**
   * `session.started` and the first `user.input` are in the log already (`start` writes them in the
   * write that creates the session): the program goes on from there with this input.
   */
  readonly recorded?: { readonly input: string } | undefined
  /** Runs once the program is ready to go on: the state restored (if there was one to restore). */
  readonly ready?: Effect.Effect<void> | undefined
  /**
   * Checkpoints: at each idle point (every agent quiet, before the next user input) where `due`
   * says so, the state is saved and handed to `write`. Nothing is saved while the session is
   * still replaying, or when a part of it cannot be saved (a plugin without `checkpoint`, a crew
   * member in a workspace of its own that no plugin gives back).
   */
  readonly checkpoints?:
    | {
        /** The seq a checkpoint taken now would be at, when one is due (every event handed out is durable). */
        readonly due: Effect.Effect<number | undefined>
        /** Whether the log is still exactly at `seq` (nothing was appended while the state was saved). */
        readonly still: (seq: number) => Effect.Effect<boolean>
        readonly write: (state: State, seq: number) => Effect.Effect<void>
      }
    | undefined
}

/** The log holds no `session.started`: the session stopped before its start (and its task) was recorded. */
export class EmptySession extends Schema.TaggedError<EmptySession>("@musekit/node/EmptySession")("EmptySession", {
  session: Schema.String
}) {
  override get message() {
    return `session ${this.session} has no task: it stopped before its task was recorded, so there is nothing to resume or replay`
  }
}

/** The checkpoint being restored does not fit this session (its state names what is not there). */
export class CheckpointUnusable extends Schema.TaggedError<CheckpointUnusable>("@musekit/node/CheckpointUnusable")(
  "CheckpointUnusable",
  { reason: Schema.String }
) {}

const unusable = (d: unknown) =>
  new CheckpointUnusable({ reason: `it cannot be restored: ${d instanceof Error ? d.message : String(d)}` })

/**
 * The session program. It records `session.started` with the config, then serves user inputs
 * until there are none. Provide a `Recorder` (`Session.run`, `replay` or `resume` do).
 */
export const program = (cfg: Config, io: Io, _services?: Services, options: ProgramOptions = {}) =>
  Effect.gen(function* () {
    const rec = yield* Recorder.Recorder
    const restore = options.restore
    if (!restore && !options.recorded) yield* rec.append(startedDraft(cfg))
    const model = yield* Model.Model
    const plugins = yield* Plugin.Plugins
    const approvals = yield* Approvals.Approvals
    const sandbox = Option.getOrUndefined(yield* Effect.serviceOption(Sandbox.Sandbox))
    const stop = Option.getOrElse(yield* Effect.serviceOption(Stop.Stop), () => Stop.never)
    /** While restoring, any failure means the checkpoint does not fit: the caller replays the whole log instead. */
    const restoring = <A, E, R>(eff: Effect.Effect<A, E, R>) =>
      restore ? Effect.catchAllDefect(eff, (d) => Effect.fail(unusable(d))) : eff
    if (restore) {
      if (!model.checkpoint || !approvals.checkpoint) {
        return yield* new CheckpointUnusable({ reason: "the model or approvals service keeps no state" })
      }
      yield* restoring(model.checkpoint.restore(restore.model))
      yield* restoring(approvals.checkpoint.restore(restore.approvals))
      yield* restoring(plugins.restore(restore.plugins))
      if (sandbox && restore.sandbox) yield* sandbox.setMode(restore.sandbox)
    }
    const crew = cfg.crew
      ? yield* restoring(Crew.make({ budget: cfg.budget, restore: restore?.crew ?? undefined }))
      : undefined
    const main = yield* restoring(
      Agent.make({
        name: "main",
        instructions: cfg.instructions,
        budget: cfg.budget,
        extraTools: crew?.tools ?? [],
        inbox: mainInbox(io, crew?.inbox),
        restore: restore?.main
      })
    )
    if (options.ready) yield* options.ready
    /** The state now, or `undefined` when a part of it cannot be saved. */
    const save = (turn: State["turn"]) =>
      Effect.gen(function* () {
        if (!model.checkpoint || !approvals.checkpoint) return undefined
        const crewState = crew ? yield* crew.save : null
        if (crewState === undefined) return undefined
        const pluginStates = yield* plugins.save
        if (pluginStates === undefined) return undefined
        return {
          config: cfg,
          main: yield* main.save,
          model: yield* model.checkpoint.save,
          approvals: yield* approvals.checkpoint.save,
          crew: crewState,
          plugins: pluginStates,
          ...(sandbox ? { sandbox: yield* sandbox.mode } : {}),
          ...(turn ? { turn } : {})
        } satisfies State
      })
    /** Take a checkpoint now if one is due (at an idle point, or between two steps of a task's turn). */
    const checkpoint = (turn?: State["turn"]) =>
      Effect.gen(function* () {
        if (!options.checkpoints || (yield* rec.replaying("main"))) return
        // an interrupted turn is continued by the next resume: from the log, not from a checkpoint
        if (!turn && Option.isSome(yield* main.interrupted)) return
        const seq = yield* options.checkpoints.due
        if (seq === undefined) return
        const state = yield* save(turn)
        if (state && (yield* options.checkpoints.still(seq))) yield* options.checkpoints.write(state, seq)
      })
    /** Send options for the task `input`: checkpoints may be taken between the steps of its turn. */
    const taskOptions = (input: string): Agent.SendOptions =>
      options.checkpoints
        ? {
            ...sendOptions,
            atStep: (state) => Effect.provideService(checkpoint({ input, state }), Recorder.Recorder, rec)
          }
        : sendOptions
    const skills = Skill.makeRegistry(plugins.skills)
    const sendOptions: Agent.SendOptions = {
      onText: io.onText ? (d) => io.onText!("main", d) : undefined,
      onToolOutput: io.onToolOutput
    }
    const output = io.output ?? (() => Effect.void)
    const turns: Array<Agent.TurnResult> = []
    /** The main agent's conversation at each idle point, by the seq just before the input that followed. */
    const idle = new Map<number, Agent.State>()
    const workspace = yield* Workspace.Workspace
    /** `/rewind <target>`: the files back from the log, then the conversation from that point. */
    const rewind = (request: { readonly spec: string; readonly force: boolean }, at: number) =>
      Effect.gen(function* () {
        if (!options.eventsBefore) return yield* output("rewind: this session cannot read its own log here")
        const events = yield* options.eventsBefore(at)
        const target = Rewind.resolve(events, request.spec)
        if (Either.isLeft(target)) return yield* output(`rewind: ${target.left}`)
        const plan = Rewind.plan(events, target.right)
        const roots = agentRoots(events)
        const result = yield* Rewind.apply({
          plan,
          force: request.force,
          workspaceFor: (agent) => {
            const root = roots.get(agent)
            if (root === undefined) return Effect.succeed(workspace)
            return Effect.option(WorkspaceNode.make(root)).pipe(Effect.map(Option.getOrUndefined))
          }
        })
        // whether the conversation went back too is decided live (a run restored from a checkpoint
        // does not know the conversations before it) and served from the log on replay
        const saved = idle.get(target.right.boundary)
        const reset = yield* Recorder.poll<boolean>({
          agent: "main",
          type: "rewind.conversation",
          take: Effect.succeed(Option.some(saved !== undefined)),
          toData: (r) => ({ boundary: target.right.boundary, reset: r }),
          fromData: (d) => (d as { reset: boolean }).reset === true
        })
        if (Option.isSome(reset) && reset.value.value) {
          if (!saved) {
            return yield* Effect.fail(
              new CheckpointUnusable({ reason: `a rewind goes back to seq ${target.right.boundary}, before it` })
            )
          }
          yield* main.reset(saved)
        }
        const lines = [...Rewind.describe(plan, result)]
        if (Option.isSome(reset) && !reset.value.value) {
          lines.push(
            "the conversation was not rewound: this run started from a checkpoint after that point (muse rewind replays the whole session and can)"
          )
        }
        lines.push("undo with: /rewind undo")
        yield* output(lines.join("\n"))
      })
    if (restore?.turn) {
      // taken mid-task: finish that task's turn first, as the session was doing
      const result = yield* main.resume(restore.turn.state, taskOptions(restore.turn.input))
      turns.push(result)
      if (io.onTurn) yield* io.onTurn(result)
      if (crew) yield* crew.run(main, sendOptions)
    }
    let first = options.recorded?.input
    while (true) {
      yield* checkpoint()
      const before = yield* main.save
      let input: string
      let inputSeq = 1
      if (first !== undefined) {
        input = first
        first = undefined
      } else {
        // a large input goes to the blob store; live, the text at hand is used (not read back)
        let taken: string | undefined
        const got = yield* Recorder.poll<Agent.TextData, Recorder.RecorderError>({
          agent: "main",
          type: "user.input",
          take: Effect.flatMap(io.input, (next) => {
            if (Option.isNone(next)) return Effect.succeed(Option.none())
            taken = next.value
            return Effect.map(Agent.storeText(rec, next.value), Option.some)
          }),
          toData: (data) => data,
          fromData: (d) => d as Agent.TextData
        })
        if (Option.isNone(got)) break
        inputSeq = got.value.event.seq
        input = taken ?? (yield* Agent.loadText(rec, got.value.value))
      }
      idle.set(inputSeq - 1, before)
      const text = input.trim()
      const approve = /^\/approve\s+(read-only|ask|auto-edit|auto)\s*$/.exec(text)
      if (approve) {
        yield* approvals.setMode(approve[1] as Approvals.Mode)
        yield* output(`approval mode: ${approve[1]}`)
        continue
      }
      const sandboxMode = /^\/sandbox(?:\s+(\S+))?\s*$/.exec(text)
      if (sandboxMode) {
        const wanted = sandboxMode[1]
        if (wanted !== undefined && !(Sandbox.modes as ReadonlyArray<string>).includes(wanted)) {
          yield* output(`usage: /sandbox ${Sandbox.modes.join("|")}`)
          continue
        }
        // replay has no sandbox: the input is recorded, the mode matters only where commands run
        if (sandbox && wanted !== undefined) yield* sandbox.setMode(wanted as Sandbox.Mode)
        if (sandbox) yield* output(Sandbox.describe(yield* sandbox.status))
        else if (wanted !== undefined) yield* output(`sandbox: ${wanted}`)
        continue
      }
      if (text === "/exit" || text === "/quit") break
      const rewindRequest = Rewind.parseInput(text)
      if (rewindRequest) {
        yield* rewind(rewindRequest, inputSeq)
      } else if (Skill.parseInvocation(text) && (yield* skills.get(Skill.parseInvocation(text)!.name))) {
        const result = yield* skills.invoke(text).pipe(
          Effect.provideService(Skill.SkillContext, { agent: main, crew, output, sendOptions }),
          Effect.catchTag("SkillError", (e) => Effect.as(output(e.message), undefined))
        )
        if (typeof result === "string") yield* output(result)
      } else {
        let result = yield* main.send(text, taskOptions(text))
        // A turn interrupted in an earlier run goes on when the session is resumed (recorded as
        // `turn.resumed`); one stopped now (a stop is pending) waits for the person.
        while (result.status === "interrupted") {
          const resumed = yield* Recorder.poll<{ readonly reason: string }>({
            agent: "main",
            type: "turn.resumed",
            take: Effect.map(stop.requested, (pending) =>
              Option.isSome(pending) ? Option.none() : Option.some({ reason: "the session was resumed" })
            ),
            toData: (d) => d,
            fromData: (d) => d as { readonly reason: string }
          })
          const at = yield* main.interrupted
          if (Option.isNone(resumed) || Option.isNone(at)) break
          const state = at.value
          const resumedAt = resumed.value.event.at
          result = yield* main.resume(
            // the time budget counts the time the turn ran, not the time it lay interrupted
            { ...state, startedAt: resumedAt - (state.lastAt - state.startedAt), lastAt: resumedAt },
            taskOptions(text)
          )
        }
        turns.push(result)
        if (io.onTurn) yield* io.onTurn(result)
      }
      if (crew) yield* crew.run(main, sendOptions)
      if (!(yield* rec.replaying("main")) && Option.isSome(yield* stop.requested)) {
        // everything stops before the next input: each crew member's turn ends, then the request is done
        if (crew) yield* crew.quiet
        yield* stop.clear
      }
    }
    if (crew) yield* crew.shutdown
    return { turns, usage: yield* main.usage } satisfies Outcome
  }).pipe(Effect.scoped)

const startedDraft = (cfg: Config): Event.Draft => ({
  agent: "main",
  type: "session.started",
  data: { title: cfg.title, config: cfg }
})

/** The services the program needs, over a real workspace. Needs a `Recorder`. */
export const layer = (cfg: Config, io: Io, services: Services, options: { readonly replaying: boolean }) => {
  const workspace = WorkspaceNode.layer(cfg.root)
  const model = Model.layer(cfg.model, { contextWindow: cfg.contextWindow }).pipe(Layer.provide(services.languageModel))
  const tools = services.tools ?? CodingTools.make(services.toolOptions)
  const plugins = Plugin.layer(services.plugins ?? [])
  return Layer.mergeAll(
    model,
    Layer.succeed(Approvals.Prompter, io.prompter),
    Approvals.layer({
      mode: cfg.approvalMode,
      rules: cfg.rules,
      persist: options.replaying ? undefined : persistRule(cfg.root),
      shell: ShellParser.parser
    }),
    workspace,
    Layer.succeed(Tools.Tools, Tools.fromList(tools)),
    Layer.succeed(Stop.Stop, io.stop ?? Stop.never),
    plugins,
    Sandbox.layer(cfg.sandbox ?? Sandbox.defaultSettings, services.sandbox)
  )
}

/** The session's events before `seq`, read from its log. */
const eventsBefore = (log: EventLog.Service) => (seq: number) =>
  Effect.map(EventLog.readAll(log), (events) => events.filter((e) => e.seq < seq))

/**
 * Where each agent's paths are relative to, when not the session's root: crew members in
 * worktrees of their own (as their allocation was recorded).
 */
export const agentRoots = (events: ReadonlyArray<Event.Envelope>): Map<string, string> => {
  const roots = new Map<string, string>()
  for (const e of events) {
    const allocation = (e.data as { allocation?: { path?: unknown } } | null)?.allocation
    if (e.type === "worktree.allocated" && typeof allocation?.path === "string") roots.set(e.agent, allocation.path)
  }
  return roots
}

/** The config a session was started with, from its first event. */
export const configOf = (events: ReadonlyArray<Event.Envelope>): Effect.Effect<Config, ConfigError> =>
  Effect.gen(function* () {
    const first = events.find((e) => e.type === "session.started")
    if (!first) {
      return yield* new ConfigError({
        file: "<log>",
        message:
          "the log has no session.started event: it was recorded by an app's own program (Session.run), not by muse or SessionRuntime; replay it with that program (Session.replay), or record sessions with SessionRuntime.start or createAgent from @musekit/node/promise"
      })
    }
    return yield* Schema.decodeUnknown(Config)((first.data as { config: unknown }).config).pipe(
      Effect.mapError(
        (e) => new ConfigError({ file: "<log>", message: `session.started holds no valid config: ${e.message}` })
      )
    )
  })

export interface StartOptions {
  readonly config: Config
  readonly session: string
  readonly io: Io
  readonly services: Services
  /**
   * The first user input, recorded as `user.input` in the very write that creates the session (with
   * `session.started`): a session never exists without the task it was started for. `io.input` is
   * asked only for the inputs after it.
   */
  readonly task?: string | undefined
  /** State directory of the file store (default `EventLogFile.defaultDir()`); unused with `store`. */
  readonly dir?: string | undefined
  /**
   * Where the session's log, blobs and checkpoints are kept (default: the file store in `dir`).
   * Any `EventLog.StoreService` works, e.g. `EventLogPg.makeStore` from `@musekit/pg`.
   */
  readonly store?: EventLog.StoreService | undefined
  /**
   * Take a checkpoint (`sessions/<id>.checkpoint.json`) at the first idle point after this many
   * events since the last one, so a resume replays only what came after it. Default 1,000; 0 = never.
   */
  readonly checkpointEvery?: number | undefined
}

/** Default events between checkpoints. */
export const CHECKPOINT_EVERY = 1000

/** The store a session runs on: the one given, else the file store of `dir`. */
export const storeFor = (options: {
  readonly store?: EventLog.StoreService | undefined
  readonly dir?: string | undefined
}): EventLog.StoreService =>
  options.store ?? EventLogFile.makeStore({ dir: options.dir, redactor: EventLogFile.envRedactor() })

/** Checkpoints of the session whose log is in context, written beside it in its store. */
const checkpointsFor = (options: {
  readonly store: EventLog.StoreService
  readonly every: number
  /** Seq of the checkpoint the run started from (-1: none). */
  readonly from: number
}): Effect.Effect<ProgramOptions["checkpoints"], never, EventLog.EventLog> =>
  Effect.gen(function* () {
    if (options.every <= 0) return undefined
    const log = yield* EventLog.EventLog
    let last = options.from
    /** The durable end of the log, when nothing handed out waits to become durable. */
    const end = Effect.flatMap(log.settled, (settled) =>
      settled ? Effect.map(log.lastSeq, (seq): number | undefined => seq) : Effect.succeed(undefined)
    )
    return {
      // the state includes every event handed out, so the checkpoint must name one that is durable:
      // when enough events came since the last one, wait for what was handed out to be written
      due: Effect.gen(function* () {
        if ((yield* log.lastSeq) - last < options.every) return undefined
        yield* Effect.ignore(log.flush)
        const seq = yield* end
        return seq !== undefined && seq - last >= options.every ? seq : undefined
      }),
      still: (seq) => Effect.map(end, (now) => now === seq),
      write: (state, seq) =>
        Effect.gen(function* () {
          const at = yield* Checkpoint.eventAt(log, seq)
          if (!at) return
          yield* options.store.writeCheckpoint(Checkpoint.make({ session: log.sessionId, at, state }))
          last = at.seq
        }).pipe(Effect.ignore) // a checkpoint that could not be written costs only resume speed
    }
  })

/** The session's log in its store, opened for writing for as long as the program runs. */
const withLog = (store: EventLog.StoreService, session: string, options?: EventLog.OpenOptions) =>
  Effect.provide(Layer.scoped(EventLog.EventLog, store.open(session, options)))

/** Start a new session on the log in context (`start` opens it). */
export const startOn = (options: Omit<StartOptions, "session"> & { readonly store: EventLog.StoreService }) =>
  Effect.gen(function* () {
    const checkpoints = yield* checkpointsFor({
      store: options.store,
      every: options.checkpointEvery ?? CHECKPOINT_EVERY,
      from: -1
    })
    let recorded: ProgramOptions["recorded"]
    let written = 0
    if (options.task !== undefined) {
      const log = yield* EventLog.EventLog
      const rec = Recorder.makeLive(log)
      const input = yield* Agent.storeText(rec, options.task)
      const first = yield* log.appendAll([
        startedDraft(options.config),
        { agent: "main", type: "user.input", data: input }
      ])
      if (options.io.onEvent) for (const e of first) yield* options.io.onEvent(e)
      recorded = { input: options.task }
      written = first.length
    }
    return yield* Session.run(
      program(options.config, options.io, options.services, {
        checkpoints,
        recorded,
        eventsBefore: eventsBefore(yield* EventLog.EventLog)
      }).pipe(Effect.provide(layer(options.config, options.io, options.services, { replaying: false }))),
      { onEvent: options.io.onEvent, written }
    )
  })

/** Start a new session, recording to its store (the durable file log by default). */
export const start = (options: StartOptions) => {
  const store = storeFor(options)
  return startOn({ ...options, store }).pipe(withLog(store, options.session, { create: true }))
}

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** Why `u` is not a session state (`undefined`: it is one). */
const stateProblem = (u: unknown): string | undefined => {
  if (!isObject(u)) return "its state is not an object"
  if (!Schema.is(Config)(u.config)) return "its state holds no valid config"
  const main = u.main
  if (!isObject(main) || !Array.isArray(main.history) || typeof main.stable !== "number" || !isObject(main.usage)) {
    return "its state holds no main agent"
  }
  if (!isObject(u.model) || !isObject(u.approvals) || !isObject(u.plugins)) return "its state is incomplete"
  if (u.crew !== null && (!isObject(u.crew) || !Array.isArray(u.crew.members) || !isObject(u.crew.assigned))) {
    return "its crew state is incomplete"
  }
  if (u.turn !== undefined && (!isObject(u.turn) || typeof u.turn.input !== "string" || !isObject(u.turn.state))) {
    return "its turn state is incomplete"
  }
  return undefined
}

/**
 * The session's usable checkpoint and the events after it; or, when there is none (or it does not
 * match the log), every event. `ignored` says why a checkpoint file was not used.
 */
export const restorePoint = (
  store: EventLog.StoreService,
  session: string
): Effect.Effect<
  {
    readonly state: State | undefined
    readonly from: number
    readonly events: ReadonlyArray<Event.Envelope>
    readonly ignored: string | undefined
  },
  EventLog.EventLogError,
  EventLog.EventLog
> =>
  Effect.gen(function* () {
    const log = yield* EventLog.EventLog
    const read = yield* store.readCheckpoint(session)
    let ignored: string | undefined
    if (Either.isRight(read)) {
      const cp = read.right
      const why = stateProblem(cp.state) ?? (yield* Checkpoint.mismatch(log, cp))
      if (why === undefined) {
        const events = yield* EventLog.readAll(log, cp.seq + 1)
        return { state: cp.state as State, from: cp.seq, events, ignored }
      }
      ignored = why
    } else if (read.left !== "none") ignored = read.left
    return { state: undefined, from: -1, events: yield* EventLog.readAll(log), ignored }
  })

export type ResumeOptions = Omit<StartOptions, "config"> & {
  readonly config?: Config | undefined
  /**
   * The folder the session goes on in when it is not the one it recorded (a workspace rebuilt on
   * another machine): its tools work there; the recorded config, and so a replay, is unchanged.
   */
  readonly root?: string | undefined
  /** `false`: ignore the checkpoint and replay the whole log. */
  readonly useCheckpoint?: boolean | undefined
}

/** Continue the session whose log is in context (`resume` opens it). */
export const resumeOn = (options: ResumeOptions & { readonly store: EventLog.StoreService }) =>
  Effect.gen(function* () {
    const log = yield* EventLog.EventLog
    const wholeLog = Effect.map(EventLog.readAll(log), (events) => ({ state: undefined, from: -1, events }))
    const run = (point: {
      readonly state: State | undefined
      readonly from: number
      readonly events: ReadonlyArray<Event.Envelope>
      readonly ignored?: string | undefined
    }) =>
      Effect.gen(function* () {
        if (!options.config && !point.state && !point.events.some((e) => e.type === "session.started")) {
          return yield* new EmptySession({ session: options.session })
        }
        const cfg = options.config ?? point.state?.config ?? (yield* configOf(point.events))
        const checkpoints = yield* checkpointsFor({
          store: options.store,
          every: options.checkpointEvery ?? CHECKPOINT_EVERY,
          from: point.from
        })
        const ready = options.io.onResume?.({
          nextSeq: (yield* log.lastSeq) + 1,
          checkpoint: point.state ? point.from : null,
          replaying: point.events.length,
          ignored: point.ignored ?? null
        })
        return yield* Session.resume(
          program(cfg, options.io, options.services, {
            restore: point.state,
            checkpoints,
            ready,
            eventsBefore: eventsBefore(log)
          }).pipe(
            Effect.provide(
              layer(options.root ? { ...cfg, root: path.resolve(options.root) } : cfg, options.io, options.services, {
                replaying: false
              })
            )
          ),
          { onEvent: options.io.onEvent, redactor: EventLogFile.envRedactor(), events: point.events }
        )
      })
    const point =
      options.useCheckpoint === false ? yield* wholeLog : yield* restorePoint(options.store, options.session)
    if (!point.state) return yield* run(point)
    // a checkpoint that matches the log but cannot be restored (a role or plugin this run lacks):
    // nothing was recorded yet, so the whole log is replayed instead
    return yield* run(point).pipe(
      Effect.catchTag("CheckpointUnusable", (e) =>
        Effect.flatMap(wholeLog, (all) => run({ ...all, ignored: e.reason }))
      )
    )
  })

/**
 * Continue a session after a crash or a stop: restore its latest checkpoint (if it matches the
 * log) and replay the events after it — or replay the whole log — then settle what was in flight
 * and go on live.
 */
export const resume = (options: ResumeOptions) => {
  const store = storeFor(options)
  return resumeOn({ ...options, store }).pipe(withLog(store, options.session))
}

/** Re-run a recorded session with no model and no side effects; `verify` reports the first divergence. */
export const replay = (options: {
  readonly session: string
  readonly dir?: string | undefined
  /** The store the session is in (default: the file store of `dir`). */
  readonly store?: EventLog.StoreService | undefined
  readonly verify?: boolean | undefined
  readonly onEvent?: ((event: Event.Envelope) => Effect.Effect<void>) | undefined
  readonly plugins?: ReadonlyArray<Plugin.PluginInput> | undefined
  /** The tools the session was recorded with, when they were not the built-in coding tools. */
  readonly tools?: ReadonlyArray<Tools.Definition> | undefined
  readonly events?: ReadonlyArray<Event.Envelope> | undefined
}) =>
  Effect.gen(function* () {
    const store = storeFor(options)
    const events = options.events ?? (yield* store.read(options.session))
    if (!events.some((e) => e.type === "session.started")) return yield* new EmptySession({ session: options.session })
    const cfg = yield* configOf(events)
    const io: Io = {
      input: Effect.succeed(Option.none()),
      prompter: { ask: () => Effect.dieMessage("a person was asked during replay") }
    }
    const services: Services = {
      languageModel: Model.layerLanguageModelForbidden,
      plugins: options.plugins,
      tools: options.tools
    }
    const before = (seq: number) => Effect.succeed(events.filter((e) => e.seq < seq))
    return yield* Session.replay(
      program(cfg, io, services, { eventsBefore: before }).pipe(Effect.provide(replayLayer(cfg, io, services))),
      {
        events,
        verify: options.verify,
        getBlob: store.getBlob,
        onEvent: options.onEvent,
        redactor: EventLogFile.envRedactor()
      }
    )
  })

/** Services for replay: like `layer`, but the workspace is never touched (a lexical one at the recorded root). */
const replayLayer = (cfg: Config, io: Io, services: Services) =>
  Layer.mergeAll(
    Model.layer(cfg.model, { contextWindow: cfg.contextWindow }).pipe(Layer.provide(services.languageModel)),
    Layer.succeed(Approvals.Prompter, io.prompter),
    Approvals.layer({ mode: cfg.approvalMode, rules: cfg.rules, shell: ShellParser.parser }),
    Workspace.layerLexical(cfg.root),
    Layer.succeed(Tools.Tools, Tools.fromList(services.tools ?? CodingTools.make(services.toolOptions))),
    Plugin.layer(services.plugins ?? [])
  )

// ---------------------------------------------------------------------------------------------
// Rewind and fork of a stopped session
// ---------------------------------------------------------------------------------------------

export class RewindRefused extends Schema.TaggedError<RewindRefused>("@musekit/node/RewindRefused")("RewindRefused", {
  message: Schema.String,
  /** Files someone else changed since the session last wrote them (`agent:path` for crew worktrees). */
  files: Schema.Array(Schema.String)
}) {}

const showFile = (f: { readonly agent: string; readonly path: string }) =>
  f.agent === "main" ? f.path : `${f.agent}:${f.path}`

/**
 * What `/rewind <to>` would do to a recorded session, and which of its files someone else
 * changed since (those are not overwritten without `force`).
 */
export const rewindPlan = (options: {
  readonly session: string
  readonly dir?: string | undefined
  readonly to: string
}) =>
  Effect.gen(function* () {
    const events = yield* EventLogFile.readSession(options.session, { dir: options.dir })
    return { events, ...(yield* planRewind(events, options.to)) }
  })

/**
 * What `/rewind <to>` would do to a session whose events are at hand (from any log store), and
 * which of its files someone else changed since, named `agent:path` for crew worktrees.
 */
export const planRewind = (events: ReadonlyArray<Event.Envelope>, to: string) =>
  Effect.gen(function* () {
    const cfg = yield* configOf(events)
    const target = Rewind.resolve(events, to)
    if (Either.isLeft(target)) return yield* new Session.RewindError({ message: target.left })
    const plan = Rewind.plan(events, target.right)
    const roots = agentRoots(events)
    const changed = yield* Rewind.changedSince(plan, (agent) =>
      Effect.option(WorkspaceNode.make(roots.get(agent) ?? cfg.root)).pipe(Effect.map(Option.getOrUndefined))
    )
    return { config: cfg, plan, changed }
  })

/**
 * Rewind a stopped session: its whole log is replayed (so every earlier conversation is known),
 * then `/rewind <to>` runs as its next input and the session stops again, ready to be resumed from
 * there. Files someone else changed since fail it with `RewindRefused` unless `force`.
 */
export const rewind = (
  options: Omit<StartOptions, "config" | "io"> & {
    readonly to: string
    readonly force?: boolean | undefined
    readonly io?: Partial<Io> | undefined
  }
) =>
  Effect.gen(function* () {
    const { plan, changed } = yield* rewindPlan({ session: options.session, dir: options.dir, to: options.to })
    if (changed.length > 0 && !options.force) {
      const files = changed.map(showFile)
      return yield* new RewindRefused({
        files,
        message: `changed since the session last wrote them, by someone else: ${files.join(", ")}; nothing was rewound. Overwrite them with force (what they hold now stays in the log, so the rewind can be undone)`
      })
    }
    let given = false
    const text = `/rewind ${plan.target.seq}${options.force ? " --force" : ""}`
    const io: Io = {
      prompter: { ask: () => Effect.succeed({ allow: false, scope: "once" as const, reason: "no one to ask" }) },
      ...options.io,
      input: Effect.sync(() => {
        if (given) return Option.none()
        given = true
        return Option.some(text)
      })
    }
    yield* resume({ ...options, io, useCheckpoint: false })
    const events = yield* EventLogFile.readSession(options.session, { dir: options.dir })
    const done = [...events].reverse().find((e) => e.type === Rewind.COMPLETED)
    return { plan, result: (done?.data ?? { restored: [], kept: [], failed: [] }) as Rewind.Result }
  })

const gitOut = (cwd: string, args: ReadonlyArray<string>) =>
  execFileSync("git", ["-c", "core.quotePath=false", ...args], {
    cwd,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"]
  })

const gitTop = (dir: string): string | undefined => {
  try {
    return fs.realpathSync(gitOut(dir, ["rev-parse", "--show-toplevel"]).trim())
  } catch {
    return undefined
  }
}

/** Copy the uncommitted state of checkout `from` (changed and untracked files, deletions) onto `to`. */
const copyDirty = (from: string, to: string) => {
  const status = gitOut(from, ["status", "--porcelain=v1", "-z", "--untracked-files=all"]).split("\0")
  for (let i = 0; i < status.length; i++) {
    const entry = status[i]!
    if (entry.length < 4) continue
    const code = entry.slice(0, 2)
    const file = entry.slice(3)
    if (code[0] === "R" || code[0] === "C") i++ // the source name follows
    const src = path.join(from, file)
    const dst = path.join(to, file)
    if (!fs.existsSync(src)) fs.rmSync(dst, { force: true })
    else if (fs.statSync(src).isFile()) {
      fs.mkdirSync(path.dirname(dst), { recursive: true })
      fs.copyFileSync(src, dst)
    }
  }
}

/** A fork made by `fork`. */
export interface Forked {
  readonly session: string
  readonly parent: string
  readonly target: Rewind.Target
  /** The fork's workspace root. */
  readonly root: string
  /** Whether it is a git worktree of its own (otherwise it shares the parent's folder). */
  readonly worktree: boolean
}

/**
 * A new session that starts as `session` was at `at`: its log holds the parent's events up to that
 * point (the parent's log is only read), and in a git repository it works in a worktree of its own
 * (and its crew members in worktrees of their own) with every file the session's tools changed put
 * back to that point. Resume it to go on from there.
 */
export const fork = (options: {
  readonly session: string
  readonly at: string
  readonly dir?: string | undefined
  /** The new session's id (default: a fresh one). */
  readonly id?: string | undefined
}) =>
  Effect.gen(function* () {
    const dir = options.dir ?? EventLogFile.defaultDir()
    const events = yield* EventLogFile.readSession(options.session, { dir })
    const cfg = yield* configOf(events)
    const id = options.id ?? EventLogFile.newSessionId()
    const blobs = EventLogFile.makeBlobs(path.join(dir, "blobs"), options.session)
    const top = gitTop(cfg.root)
    const made = yield* Effect.try({
      try: () => {
        if (!top) return { root: cfg.root, worktrees: new Map<string, { path: string; branch: string }>() }
        const base = path.join(top, "..", ".muse-worktrees", path.basename(top), id)
        const main = path.join(base, "main")
        fs.mkdirSync(base, { recursive: true })
        gitOut(top, ["worktree", "add", "--detach", main, "HEAD"])
        copyDirty(top, main)
        const worktrees = new Map<string, { path: string; branch: string }>()
        for (const [agent, from] of agentRoots(events)) {
          const branch = `muse/${id}/${agent}`
          const to = path.join(base, agent)
          const head = fs.existsSync(from) ? gitOut(from, ["rev-parse", "HEAD"]).trim() : "HEAD"
          gitOut(top, ["worktree", "add", "-b", branch, to, head])
          if (fs.existsSync(from)) copyDirty(from, to)
          worktrees.set(agent, { path: to, branch })
        }
        return { root: path.join(main, path.relative(top, cfg.root)), worktrees }
      },
      catch: (e) =>
        new Session.RewindError({
          message: `the fork's worktree could not be made: ${e instanceof Error ? e.message : String(e)}`
        })
    })
    const forked = Session.fork({ events, session: options.session, at: options.at, root: made.root })
    if (Either.isLeft(forked)) return yield* forked.left
    const target = forked.right.target
    // crew members in worktrees of their own: theirs, not the parent's
    const copied = forked.right.events.map((e) => {
      const moved = made.worktrees.get(e.agent)
      if (!moved) return e
      const d = e.data as { allocation?: Record<string, unknown>; workspace?: Record<string, unknown> }
      if (e.type === "worktree.allocated" && d.allocation) {
        return { ...e, data: { ...d, allocation: { ...d.allocation, path: moved.path, branch: moved.branch } } }
      }
      if (e.type === "crew.spawned" && d.workspace && typeof d.workspace.path === "string") {
        return { ...e, data: { ...d, workspace: { ...d.workspace, path: moved.path, branch: moved.branch } } }
      }
      return e
    })
    if (top) {
      // every file the session's tools changed, back to that point
      const plan = Rewind.plan(events, target)
      for (const f of plan.files) {
        const root = f.agent === "main" || !made.worktrees.has(f.agent) ? made.root : made.worktrees.get(f.agent)!.path
        const ws = yield* Effect.orDie(WorkspaceNode.make(root))
        const bytes = f.to === null ? null : yield* Effect.orDie(blobs.get(f.to))
        yield* Effect.orDie(ws.restore(f.path, bytes))
      }
    }
    yield* Effect.try({
      try: () => {
        const file = path.join(dir, "sessions", `${id}.jsonl`)
        if (fs.existsSync(file)) throw new Error(`session ${id} exists`)
        const text = copied.map((e) => `${EventLogFile.withChecksum(Event.encodeLine(e))}\n`).join("")
        fs.writeFileSync(file, text, { mode: 0o600, flag: "wx" })
      },
      catch: (e) => new Session.RewindError({ message: `the fork's log could not be written: ${(e as Error).message}` })
    })
    return {
      session: id,
      parent: options.session,
      target,
      root: made.root,
      worktree: top !== undefined
    } satisfies Forked
  })
