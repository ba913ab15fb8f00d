/**
 * What every session command shares: flags → config files → the session config, the language
 * model and the plugins; and the exit code a finished session maps to.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type { LanguageModel } from "@effect/ai"
import type { Approvals, Event, EventLog } from "@musekit/core"
import { Git, Sandbox, SessionRuntime } from "@musekit/node"
import { Effect, Either, type Layer, type Scope } from "effect"
import * as Config from "./config.js"
import { CliError, ExitCode } from "./exit.js"
import * as LogStore from "./logStore.js"
import * as Mcp from "./mcp.js"
import * as Model from "./model.js"
import * as Plugins from "./plugins.js"
import * as Trust from "./trust.js"

export interface Flags {
  readonly model?: string | undefined
  readonly approvalMode?: Approvals.Mode | undefined
  /** The OS sandbox of shell commands (`--sandbox`). */
  readonly sandbox?: Sandbox.Mode | undefined
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
  /** Where sessions are kept: a directory or a `postgres://` URL (`--log`). */
  readonly log?: string | undefined
  /** Hidden test flag: a scripted model from this file. */
  readonly script?: string | undefined
}

export const emptyFlags: Flags = { allow: [], deny: [], noCrew: false }

export interface Prepared {
  readonly root: string
  /** Where the session's log is kept, and the store there (open while the command runs). */
  readonly location: LogStore.Location
  readonly store: EventLog.StoreService
  readonly config: SessionRuntime.Config
  readonly modelSource: string
  readonly languageModel: Layer.Layer<LanguageModel.LanguageModel>
  readonly plugins: Plugins.PluginSet
  readonly loaded: Config.Loaded
  /** Where the context window came from (`--context-window`, a config file, the model table, the server…). */
  readonly contextWindowSource: string
  /** Lines for the user before the session starts (e.g. that the folder's settings are not used). */
  readonly notices: ReadonlyArray<string>
  /** What the sandbox keeps read-only (the user's muse config) and hides (the state directory). */
  readonly sandboxOptions: Sandbox.Options
}

/** Paths the sandbox protects besides the built-in ones: muse's own config and state. */
export const sandboxOptions = (loaded: Config.Loaded, stateDir: string): Sandbox.Options => ({
  readOnly: [path.dirname(loaded.userFile)],
  hidden: [stateDir]
})

/**
 * The line that says commands run without an OS sandbox (none is available here, or it is off),
 * or nothing when they run in one.
 */
export const sandboxNotice = (settings: Sandbox.Settings | undefined): Effect.Effect<string | undefined> =>
  Effect.gen(function* () {
    const mode = settings?.mode ?? "workspace-write"
    if (mode === "off") return undefined
    const a = yield* Effect.promise(() => Sandbox.detectInBackground())
    if (a.available) return undefined
    return `no OS sandbox for shell commands: ${a.reason ?? "none is available"}. Commands run with your full rights, guarded by approvals only (see /status; --sandbox off says you meant it)`
  })

/**
 * Start the machine's checks that spawn processes (the sandbox probe, git's version) so they run
 * beside the rest of a session's preparation; whoever needs an answer waits for it there. The
 * answers do not depend on when they arrive.
 */
const startProbes = () => {
  void Sandbox.detectInBackground()
  void Git.checkVersion()
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
  /** Told before the model's HTTP client waits to retry (429, 5xx, a lost connection). */
  readonly onRetry?: ((retry: Model.Retry) => void) | undefined
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
): Effect.Effect<Prepared, CliError, Scope.Scope> =>
  Effect.gen(function* () {
    const root = yield* rootOf(flags, env)
    startProbes()
    // whether worktrees can be made (git, in the background until it is needed)
    const isRepo = Plugins.inGitRepo(root)
    const trust = yield* decide(root)
    const loaded = yield* Config.load(root, env.env, { project: trust.trusted })
    const location = yield* LogStore.locate(flags.log, loaded, env.env, env.cwd)
    const store = yield* LogStore.open(location, env.env)
    const notices: Array<string> = []
    const untrusted = untrustedNotice(trust)
    if (untrusted) notices.push(untrusted)
    for (const key of ["stateDir", "log"] as const) {
      if (loaded.project?.[key]) {
        notices.push(
          `${loaded.projectFile} sets ${key}; a project cannot choose where sessions are stored, so it is not used (set it in ${loaded.userFile}, MUSE_HOME or --log)`
        )
      }
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
      onRequest: env.onRequest,
      onRetry: env.onRetry,
      session
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
      (yield* Effect.promise(() => isRepo))
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
      sandbox: Config.sandboxSettings(flags.sandbox, loaded),
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
    const sandboxed = yield* sandboxNotice(config.sandbox)
    if (sandboxed) notices.push(sandboxed)
    return {
      root,
      location,
      store,
      config,
      modelSource: choice.source,
      languageModel,
      plugins: problems.length > 0 ? { ...plugins, warnings: [...plugins.warnings, ...problems] } : plugins,
      loaded,
      contextWindowSource: window.source,
      notices,
      sandboxOptions: sandboxOptions(loaded, Config.stateDir(loaded, env.env))
    } satisfies Prepared
  })

/** The store of the sessions, for commands that only read them (open while the scope lasts). */
export const storeFor = (
  flags: Pick<Flags, "cwd" | "log">,
  env: Env
): Effect.Effect<
  { readonly store: EventLog.StoreService; readonly location: LogStore.Location },
  CliError,
  Scope.Scope
> =>
  Effect.gen(function* () {
    const location = yield* locationFor(flags, env)
    return { store: yield* LogStore.open(location, env.env), location }
  })

/** Where the sessions are kept, without opening them. */
export const locationFor = (flags: Pick<Flags, "cwd" | "log">, env: Env): Effect.Effect<LogStore.Location, CliError> =>
  Effect.gen(function* () {
    const root = yield* rootOf(flags, env)
    const loaded = yield* Config.load(root, env.env, { project: false })
    return yield* LogStore.locate(flags.log, loaded, env.env, env.cwd)
  })

export const logError = (e: { readonly _tag: string; readonly message: string }): CliError =>
  new CliError({
    code: e._tag === "SessionNotFound" ? ExitCode.Usage : ExitCode.Failed,
    message:
      e._tag === "SessionNotFound"
        ? `no such session: ${JSON.stringify((e as any).session)} is not in ${(e as any).where} (muse sessions lists them)`
        : e._tag === "SessionLocked"
          ? `session ${(e as any).session} is in use by process ${(e as any).pid}; nothing was done (close that muse first, or wait for it to finish)`
          : e.message
  })

/** Why a session without a recorded start cannot be resumed. */
export const noTask = (session: string) =>
  new CliError({
    code: ExitCode.NothingToResume,
    message: `session ${session} has no task: it stopped before its task was recorded, so there is nothing to resume.`,
    detail: 'Start the task again: muse run "<task>"'
  })

/** A recorded session's events (none for a session that stopped before its first event was written). */
export const readRecorded = (session: string, store: EventLog.StoreService) =>
  Effect.map(store.read(session).pipe(Effect.mapError(logError)), (events) => ({ events }))

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
): Effect.Effect<
  Prepared & {
    readonly events: ReadonlyArray<Event.Envelope>
    readonly nextSeq: number
    /** `--cwd` named another folder than the recorded one: the session goes on there. */
    readonly moved: boolean
  },
  CliError,
  Scope.Scope
> =>
  Effect.gen(function* () {
    const root = yield* rootOf(flags, env)
    startProbes()
    const loaded = yield* Config.load(root, env.env, { project: false })
    const location = yield* LogStore.locate(flags.log, loaded, env.env, env.cwd)
    const store = yield* LogStore.open(location, env.env)
    const ends = yield* store.ends(session).pipe(Effect.mapError(logError))
    if (ends.first?.type !== "session.started") {
      // empty, or its first line torn: opening it repairs it and clears a stale lock; still no task
      yield* Effect.scoped(store.open(session)).pipe(Effect.mapError(logError))
      return yield* noTask(session)
    }
    const recorded = yield* SessionRuntime.configOf([ends.first]).pipe(
      Effect.mapError((e) => new CliError({ code: ExitCode.Failed, message: `session ${session}: ${e.message}` }))
    )
    // a session whose workspace was rebuilt elsewhere (a cluster runner's clone) goes on in that folder
    const moved = flags.cwd !== undefined && root !== recorded.root
    const config = recorded
    const workRoot = moved ? root : recorded.root
    const nextSeq = (ends.last?.seq ?? -1) + 1
    const checkpoint = yield* store.readCheckpoint(session)
    const fromSeq = Either.isRight(checkpoint) && checkpoint.right.seq < nextSeq ? checkpoint.right.seq + 1 : 0
    const events = yield* store.read(session, fromSeq).pipe(Effect.mapError(logError))
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
    const recordedSandbox = config.sandbox?.mode ?? "workspace-write"
    if (flags.sandbox !== undefined && flags.sandbox !== recordedSandbox) {
      return yield* new CliError({
        code: ExitCode.Usage,
        message: `session ${session} was recorded with --sandbox ${recordedSandbox}; a resumed session keeps it (change it inside the session with /sandbox ${flags.sandbox})`
      })
    }
    const languageModel = yield* Model.languageModel(config.model, {
      env: env.env,
      scriptFlag: flags.script,
      onRequest: env.onRequest,
      onRetry: env.onRetry,
      session
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
      root: workRoot,
      projectSkills: trust.trusted,
      worktrees: Plugins.recordedWorktrees(config, session),
      contextWindow: config.contextWindow,
      mcp
    })
    const untrusted = untrustedNotice(trust)
    const sandboxed = yield* sandboxNotice(config.sandbox)
    return {
      root: workRoot,
      location,
      store,
      config,
      modelSource: "the session",
      languageModel,
      plugins,
      loaded,
      contextWindowSource: config.contextWindow === undefined ? "the model table" : "the session",
      notices: [...(untrusted ? [untrusted] : []), ...(sandboxed ? [sandboxed] : [])],
      sandboxOptions: sandboxOptions(loaded, Config.stateDir(loaded, env.env)),
      events,
      nextSeq,
      moved
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

/** The newest session of a store (an empty one too: it says itself why it is empty). */
export const latestSession = (store: EventLog.StoreService): Effect.Effect<string, CliError> =>
  Effect.gen(function* () {
    const list = yield* store.sessions.pipe(Effect.mapError(logError))
    const first = list[0]
    if (!first) return yield* new CliError({ code: ExitCode.Usage, message: `no sessions in ${store.where} yet` })
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
