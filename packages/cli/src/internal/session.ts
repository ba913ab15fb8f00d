/**
 * What every session command shares: flags → config files → the session config, the language
 * model and the plugins; and the exit code a finished session maps to.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type { LanguageModel } from "@effect/ai"
import type { Approvals, Event } from "@musekit/core"
import { EventLogFile, SessionRuntime } from "@musekit/node"
import { Effect, Either, type Layer } from "effect"
import * as Config from "./config.js"
import { CliError, ExitCode } from "./exit.js"
import * as Mcp from "./mcp.js"
import * as Model from "./model.js"
import * as Plugins from "./plugins.js"
import * as Trust from "./trust.js"

export interface Flags {
  readonly model?: string | undefined
  readonly approvalMode?: Approvals.Mode | undefined
  readonly allow: ReadonlyArray<string>
  readonly deny: ReadonlyArray<string>
  readonly maxTurns?: number | undefined
  /** The model's context window in tokens, for models the table does not know. */
  readonly contextWindow?: number | undefined
  readonly noCrew: boolean
  readonly cwd?: string | undefined
  /** Crew members share the checkout instead of working in git worktrees of their own. */
  readonly noWorktrees?: boolean | undefined
  /** Use the folder's own settings for this run without asking (`--trust`). */
  readonly trust?: boolean | undefined
  /** Hidden test flag: a scripted model from this file. */
  readonly script?: string | undefined
}

export const emptyFlags: Flags = { allow: [], deny: [], noCrew: false }

export interface Prepared {
  readonly root: string
  readonly stateDir: string
  readonly config: SessionRuntime.Config
  readonly modelSource: string
  readonly languageModel: Layer.Layer<LanguageModel.LanguageModel>
  readonly plugins: Plugins.PluginSet
  readonly loaded: Config.Loaded
  /** Where the context window came from (`--context-window`, a config file, the model table, the server…). */
  readonly contextWindowSource: string
  /** Lines for the user before the session starts (e.g. that the folder's settings are not used). */
  readonly notices: ReadonlyArray<string>
}

/** Whether the folder's own files take effect in a session (see `trust.ts`). */
export interface TrustDecision {
  readonly project: Trust.Project
  readonly status: Trust.Status
  readonly trusted: boolean
}

/** The folder's files and what the user's trust record says of them. */
export const projectTrust = (root: string, env: Env) => {
  const project = Trust.scan(root)
  return { project, status: Trust.status(project, env.env) }
}

/** Decides for the folder a session runs in (it is known only once a resumed session is read). */
export type Decide = (root: string) => Effect.Effect<TrustDecision, CliError>

/** Without anyone to ask: trusted when recorded so, or with `--trust`; never otherwise. */
export const headlessTrust =
  (flags: Flags, env: Env): Decide =>
  (root) =>
    Effect.sync(() => {
      const { project, status } = projectTrust(root, env)
      return {
        project,
        status,
        trusted: status._tag === "trusted" || (flags.trust === true && status._tag !== "nothing")
      }
    })

const skillCount = (project: Trust.Project) => project.files.filter((f) => f.rel.endsWith("/SKILL.md")).length

/** The one line that says a folder's settings are not used. */
export const untrustedNotice = (decision: TrustDecision): string | undefined => {
  if (decision.trusted || decision.project.files.length === 0) return undefined
  const skills = skillCount(decision.project)
  const what = [
    ...decision.project.files.filter((f) => !f.rel.endsWith("/SKILL.md")).map((f) => f.rel),
    ...(skills > 0 ? [`${skills} skill${skills === 1 ? "" : "s"}`] : [])
  ].join(", ")
  const why =
    decision.status._tag === "changed"
      ? `they changed since you trusted this folder (${decision.status.changed.join(", ")})`
      : decision.status._tag === "untrusted" && decision.status.problem
        ? `this folder is not trusted (${decision.status.problem})`
        : "this folder is not trusted"
  return `this folder's own settings are not used (${what}): ${why}. See what they set and trust them with: muse trust --show, muse trust (or --trust for one run)`
}

export interface Env {
  readonly env: NodeJS.ProcessEnv
  readonly cwd: string
  /** Called at each model request (startup measurements). */
  readonly onRequest?: (() => void) | undefined
}

export const rootOf = (flags: Pick<Flags, "cwd">, env: Env): Effect.Effect<string, CliError> =>
  Effect.suspend(() => {
    const root = path.resolve(env.cwd, flags.cwd ?? ".")
    try {
      if (!fs.statSync(root).isDirectory()) throw new Error("not a directory")
    } catch {
      return Effect.fail(new CliError({ code: ExitCode.Usage, message: `--cwd ${flags.cwd}: no such directory` }))
    }
    return Effect.succeed(fs.realpathSync(root))
  })

const scriptedSpec = (file: string) => `scripted/${path.basename(file).replace(/(\.script)?\.json$/, "")}`

/** Options of a new session beyond the flags. */
export interface NewOptions {
  /** MCP servers an editor hands over (ACP `session/new`). */
  readonly mcpServers?: Mcp.Found | undefined
}

/** Everything a new session needs (`session`: the id it will get, which names its worktree branches). */
export const prepareNew = (
  flags: Flags,
  env: Env,
  session: string,
  title: string,
  decide: Decide,
  options: NewOptions = {}
): Effect.Effect<Prepared, CliError> =>
  Effect.gen(function* () {
    const root = yield* rootOf(flags, env)
    const trust = yield* decide(root)
    const loaded = yield* Config.load(root, env.env, { project: trust.trusted })
    const notices: Array<string> = []
    const untrusted = untrustedNotice(trust)
    if (untrusted) notices.push(untrusted)
    if (loaded.project?.stateDir) {
      notices.push(
        `${loaded.projectFile} sets stateDir; a project cannot choose where sessions are stored, so it is not used (set it in ${loaded.userFile} or MUSE_HOME)`
      )
    }
    const flagModel = flags.script && !flags.model ? scriptedSpec(flags.script) : flags.model
    const choice = Config.chooseModel(flagModel, loaded, env.env) ?? Model.defaultFor(env.env)
    if (!choice) {
      return yield* new CliError({
        code: ExitCode.Usage,
        message: "No model is configured and no API key is set.",
        detail: Model.noKeyScreen()
      })
    }
    const languageModel = yield* Model.languageModel(choice.spec, {
      env: env.env,
      scriptFlag: flags.script,
      onRequest: env.onRequest
    })
    const projectRules = trust.trusted
      ? yield* SessionRuntime.loadProjectRules(root).pipe(
          Effect.mapError((e) => new CliError({ code: ExitCode.Usage, message: e.message }))
        )
      : []
    const flagRules: Array<Approvals.Rule> = []
    for (const a of flags.allow) flagRules.push(yield* Config.parseRuleFlag(a, "allow"))
    for (const a of flags.deny) flagRules.push(yield* Config.parseRuleFlag(a, "deny"))
    const budget = { ...loaded.user?.budget, ...loaded.project?.budget }
    const turns = flags.maxTurns ?? budget.turns
    if (turns !== undefined && (!Number.isInteger(turns) || turns < 1)) {
      return yield* new CliError({
        code: ExitCode.Usage,
        message: `--max-turns must be a whole number of at least 1, got ${turns}`
      })
    }
    if (flags.contextWindow !== undefined && !(Number.isInteger(flags.contextWindow) && flags.contextWindow >= 1)) {
      return yield* new CliError({
        code: ExitCode.Usage,
        message: `--context-window must be a whole number of tokens, got ${flags.contextWindow}`
      })
    }
    const window = yield* Model.contextWindow(choice.spec, { flag: flags.contextWindow, loaded, env: env.env })
    const crew = flags.noCrew ? false : (loaded.project?.crew ?? loaded.user?.crew ?? true)
    const worktrees =
      crew &&
      !flags.noWorktrees &&
      (loaded.project?.worktrees ?? loaded.user?.worktrees ?? true) &&
      Plugins.inGitRepo(root)
    // a folder's own MCP servers run programs the repository names: only in a trusted folder
    const configured = yield* Mcp.load(root, env.env, { project: trust.trusted, loaded })
    const mcp = yield* Mcp.start(Mcp.merge(configured, options.mcpServers ?? { servers: {}, problems: [] }), {
      root,
      env: env.env
    })
    const plugins = yield* Plugins.make({
      root,
      projectSkills: trust.trusted,
      worktrees: worktrees ? { sessionId: session } : undefined,
      contextWindow: window.tokens,
      mcp
    })
    const problems = [...configured.problems, ...(options.mcpServers?.problems ?? [])]
    const config = SessionRuntime.config({
      root,
      title,
      plugins: plugins.names,
      ...(mcp ? { discovered: { mcp: mcp.discovery } } : {}),
      model: choice.spec,
      approvalMode: flags.approvalMode ?? loaded.project?.approvalMode ?? loaded.user?.approvalMode ?? "auto-edit",
      rules: [...(loaded.user?.rules ?? []), ...(loaded.project?.rules ?? []), ...projectRules, ...flagRules],
      instructions: SessionRuntime.instructionsFor(root, worktrees ? Plugins.worktreeInstructions : undefined),
      crew,
      contextWindow: window.tokens,
      budget: {
        ...(turns !== undefined ? { turns } : {}),
        ...(budget.tokens !== undefined ? { tokens: budget.tokens } : {}),
        ...(budget.wallMs !== undefined ? { wallMs: budget.wallMs } : {})
      }
    })
    return {
      root,
      stateDir: Config.stateDir(loaded, env.env),
      config,
      modelSource: choice.source,
      languageModel,
      plugins: problems.length > 0 ? { ...plugins, warnings: [...plugins.warnings, ...problems] } : plugins,
      loaded,
      contextWindowSource: window.source,
      notices
    } satisfies Prepared
  })

/** The state directory for commands that only read sessions. */
export const stateDirFor = (flags: Pick<Flags, "cwd">, env: Env): Effect.Effect<string, CliError> =>
  Effect.gen(function* () {
    const root = yield* rootOf(flags, env)
    const loaded = yield* Config.load(root, env.env, { project: false })
    return Config.stateDir(loaded, env.env)
  })

const logError = (e: { readonly _tag: string; readonly message: string }): CliError =>
  new CliError({
    code: e._tag === "SessionNotFound" ? ExitCode.Usage : ExitCode.Failed,
    message: e._tag === "SessionNotFound" ? `no session ${(e as any).session} in ${(e as any).where}` : e.message
  })

/** A recorded session's events (any MuseKit session: `muse log` reads those an SDK app recorded too). */
export const readEvents = (session: string, dir: string) =>
  EventLogFile.readSession(session, { dir }).pipe(Effect.mapError(logError))

/** A recorded session: its events and config. */
export const readRecorded = (session: string, dir: string) =>
  Effect.gen(function* () {
    const events = yield* readEvents(session, dir)
    const config = yield* SessionRuntime.configOf(events).pipe(
      Effect.mapError((e) => new CliError({ code: ExitCode.Failed, message: `session ${session}: ${e.message}` }))
    )
    return { events, config }
  })

/**
 * What resuming a recorded session needs: its recorded config, a model for it, the plugins, the
 * seq it goes on from, and its recent events: those after its checkpoint (a question still open
 * at a crash comes after it), or all of them when it has none. Only the ends of a long log and
 * that stretch are read.
 */
export const prepareResume = (
  session: string,
  flags: Flags,
  env: Env,
  decide: Decide,
  options: NewOptions = {}
): Effect.Effect<Prepared & { readonly events: ReadonlyArray<Event.Envelope>; readonly nextSeq: number }, CliError> =>
  Effect.gen(function* () {
    const root = yield* rootOf(flags, env)
    const loaded = yield* Config.load(root, env.env, { project: false })
    const stateDir = Config.stateDir(loaded, env.env)
    const ends = yield* EventLogFile.readEnds(session, { dir: stateDir }).pipe(Effect.mapError(logError))
    const config = yield* SessionRuntime.configOf(ends.first ? [ends.first] : []).pipe(
      Effect.mapError((e) => new CliError({ code: ExitCode.Failed, message: `session ${session}: ${e.message}` }))
    )
    const nextSeq = (ends.last?.seq ?? -1) + 1
    const checkpoint = EventLogFile.readCheckpoint(stateDir, session)
    const fromSeq = Either.isRight(checkpoint) && checkpoint.right.seq < nextSeq ? checkpoint.right.seq + 1 : 0
    const events = yield* EventLogFile.readSession(session, { dir: stateDir, fromSeq }).pipe(Effect.mapError(logError))
    if (flags.model && flags.model !== config.model) {
      return yield* new CliError({
        code: ExitCode.Usage,
        message: `session ${session} was recorded with ${config.model}; a session keeps its model (start a new one for ${flags.model})`
      })
    }
    if (flags.contextWindow !== undefined && flags.contextWindow !== config.contextWindow) {
      return yield* new CliError({
        code: ExitCode.Usage,
        message: `session ${session} was recorded with ${
          config.contextWindow === undefined
            ? "the model table's context window"
            : `a context window of ${config.contextWindow} tokens`
        }; a session keeps its window (start a new one for --context-window ${flags.contextWindow})`
      })
    }
    const languageModel = yield* Model.languageModel(config.model, {
      env: env.env,
      scriptFlag: flags.script,
      onRequest: env.onRequest
    })
    // the session's approval mode and rules were settled when it started (they are in its log);
    // the project's skills and MCP servers are read again, so they need the folder's trust now
    const trust = yield* decide(config.root)
    const configured = yield* Mcp.load(config.root, env.env, {
      project: trust.trusted,
      loaded: yield* Config.load(config.root, env.env, { project: trust.trusted })
    })
    const mcp = yield* recordedMcp(
      config,
      Mcp.merge(configured, options.mcpServers ?? { servers: {}, problems: [] }),
      env.env
    )
    const plugins = yield* Plugins.make({
      root: config.root,
      projectSkills: trust.trusted,
      worktrees: Plugins.recordedWorktrees(config, session),
      contextWindow: config.contextWindow,
      mcp
    })
    const untrusted = untrustedNotice(trust)
    return {
      root: config.root,
      stateDir,
      config,
      modelSource: "the session",
      languageModel,
      plugins,
      loaded,
      contextWindowSource: config.contextWindow === undefined ? "the model table" : "the session",
      notices: untrusted ? [untrusted] : [],
      events,
      nextSeq
    }
  })

/**
 * The MCP plugin of a recorded session: its recorded tools, served by `found` (the servers as
 * configured now, started in the background) or, for a replay (`undefined`), by nothing. Absent
 * when the session was recorded without MCP servers, whatever is configured now.
 */
export const recordedMcp = (
  config: SessionRuntime.Config,
  found: Mcp.Found | undefined,
  env: NodeJS.ProcessEnv
): Effect.Effect<Mcp.Loaded | undefined> =>
  config.plugins?.includes("mcp")
    ? Mcp.recorded(config.discovered?.mcp, found, { root: config.root, env })
    : Effect.succeed(undefined)

/** The newest session of a state directory. */
export const latestSession = (dir: string): Effect.Effect<string, CliError> =>
  Effect.gen(function* () {
    const list = yield* EventLogFile.sessions({ dir }).pipe(Effect.mapError(logError))
    const first = list.find((s) => s.events > 0)
    if (!first) return yield* new CliError({ code: ExitCode.Usage, message: `no sessions in ${dir} yet` })
    return first.id
  })

/** The exit code of a run, from the events it recorded. */
export const exitCodeOf = (
  events: ReadonlyArray<Event.Envelope>
): { readonly code: number; readonly status: string; readonly reason?: string | undefined; readonly text: string } => {
  let status = "completed"
  let reason: string | undefined
  let text = ""
  let code: number = ExitCode.Success
  for (const e of events) {
    const data = (e.data ?? {}) as any
    if (e.agent === "main" && e.type === "turn.interrupted") {
      status = "interrupted"
      reason = "interrupted"
      code = ExitCode.Interrupted
    } else if (e.agent === "main" && e.type === "turn.completed") {
      status = data.status
      reason = data.reason ?? undefined
      text = data.text ?? text
      code =
        data.status === "completed" ? ExitCode.Success : data.status === "budget" ? ExitCode.Budget : ExitCode.Failed
    } else if (e.type === "goal.completed" && data.status !== "achieved") {
      status = data.status === "budget" ? "budget" : "failed"
      reason = data.reason ?? undefined
      code = data.status === "budget" ? ExitCode.Budget : ExitCode.Failed
    }
  }
  return { code, status, reason, text }
}
