/**
 * Configuration files: a user file (`$XDG_CONFIG_HOME/muse/config.json`, else
 * `~/.config/muse/config.json`) and a project file (`<project>/.muse/config.json`), validated with
 * `effect/Schema`. Flags beat the environment, which beats the project file, which beats the user
 * file. Rules add up (user, project, `.muse/permissions.json`, then flags). The project file is
 * read only in a trusted folder, and its `stateDir` is never used.
 *
 * @example
 * ```ts
 * const loaded = yield* Config.load("/work/app", process.env, { project: true })
 * Config.stateDir(loaded) // "~/.local/state/muse" unless MUSE_HOME or the user file says otherwise
 * ```
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Approvals } from "@musekit/core"
import { Sandbox } from "@musekit/node"
import { Effect, ParseResult, Schema } from "effect"
import { CliError, ExitCode } from "./exit.js"

const PositiveInt = Schema.Int.pipe(Schema.positive())

/** The schema of both config files. Every field is optional. */
export const ConfigFile = Schema.Struct({
  $schema: Schema.optional(Schema.String),
  /** `provider/model`, e.g. `anthropic/claude-sonnet-4-5` or `ollama/qwen2.5-coder`. */
  model: Schema.optional(Schema.String.pipe(Schema.minLength(1))),
  approvalMode: Schema.optional(Approvals.Mode),
  rules: Schema.optional(Schema.Array(Approvals.Rule)),
  /**
   * The OS sandbox of shell commands: `mode` (`workspace-write`, the default; `read-only`; `off`),
   * `network.allow` (hosts reachable through the proxy), `writable` (more folders commands may
   * write), `hidden` (more paths they may not read), `processes` (the process limit), `reuse`
   * (Linux: `false` starts a new sandbox for every command instead of one per workspace).
   */
  sandbox: Schema.optional(
    Schema.Struct({
      mode: Schema.optional(Sandbox.Mode),
      network: Schema.optional(Schema.Struct({ allow: Schema.optional(Schema.Array(Schema.String)) })),
      writable: Schema.optional(Schema.Array(Schema.String)),
      hidden: Schema.optional(Schema.Array(Schema.String)),
      processes: Schema.optional(Schema.Int.pipe(Schema.greaterThanOrEqualTo(16))),
      reuse: Schema.optional(Schema.Boolean)
    })
  ),
  /** Start the crew of background agents (default true). */
  crew: Schema.optional(Schema.Boolean),
  /** In a git repository, give every writing crew member a git worktree of its own (default true). */
  worktrees: Schema.optional(Schema.Boolean),
  /** Limits per task: model calls, tokens, wall time in milliseconds. */
  budget: Schema.optional(
    Schema.Struct({
      turns: Schema.optional(PositiveInt),
      tokens: Schema.optional(PositiveInt),
      wallMs: Schema.optional(PositiveInt)
    })
  ),
  /** Where sessions are stored (default `$MUSE_HOME`, else `~/.local/state/muse`). */
  stateDir: Schema.optional(Schema.String.pipe(Schema.minLength(1))),
  /** Where session logs are kept instead of the state directory: a directory or a `postgres://` URL. */
  log: Schema.optional(Schema.String.pipe(Schema.minLength(1))),
  /**
   * Per model (keyed by `provider/model` as written with --model, or by the model id alone):
   * `contextWindow` in tokens, for models the built-in table does not know or a server that runs
   * one with another window.
   */
  models: Schema.optional(
    Schema.Record({
      key: Schema.String,
      value: Schema.Struct({ contextWindow: Schema.optional(PositiveInt) })
    })
  ),
  /**
   * OpenTelemetry (read from the user's file only; the OTEL_EXPORTER_OTLP_* variables beat it):
   * `endpoint` (the collector's OTLP/HTTP base URL, e.g. `http://127.0.0.1:4318`), `headers`,
   * `protocol` (`http/protobuf`, the default, or `http/json`), `serviceName` (default `muse`).
   */
  telemetry: Schema.optional(
    Schema.Struct({
      endpoint: Schema.optional(Schema.String.pipe(Schema.minLength(1))),
      headers: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
      protocol: Schema.optional(Schema.Literal("http/protobuf", "http/json")),
      serviceName: Schema.optional(Schema.String.pipe(Schema.minLength(1)))
    })
  ),
  /** MCP servers, in the shape of Claude Code's `.mcp.json` (each entry is checked when it starts). */
  mcpServers: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
})
export type ConfigFile = typeof ConfigFile.Type

export const userConfigFile = (env: NodeJS.ProcessEnv = process.env): string =>
  path.join(
    env.XDG_CONFIG_HOME && env.XDG_CONFIG_HOME !== "" ? env.XDG_CONFIG_HOME : path.join(os.homedir(), ".config"),
    "muse",
    "config.json"
  )

export const projectConfigFile = (root: string): string => path.join(root, ".muse", "config.json")

const decode = Schema.decodeUnknownEither(ConfigFile, { onExcessProperty: "error", errors: "all" })

const describePath = (p: ReadonlyArray<PropertyKey>): string =>
  p.length === 0
    ? "the top level"
    : `field "${p.map((k, i) => (typeof k === "number" ? `[${k}]` : i === 0 ? String(k) : `.${String(k)}`)).join("")}"`

const known = Object.keys(ConfigFile.fields)
  .filter((k) => k !== "$schema")
  .join(", ")

/** One line per field: union alternatives are merged, the "or absent" of optional fields dropped. */
const describeIssues = (issues: ReadonlyArray<ParseResult.ArrayFormatterIssue>): Array<string> => {
  const byPath = new Map<string, { path: ReadonlyArray<PropertyKey>; messages: Array<string>; unknown: boolean }>()
  for (const i of issues) {
    const k = JSON.stringify(i.path.map(String))
    let entry = byPath.get(k)
    if (!entry) byPath.set(k, (entry = { path: i.path, messages: [], unknown: false }))
    if (i._tag === "Unexpected") entry.unknown = true
    else if (!/^Expected undefined,/.test(i.message)) entry.messages.push(i.message)
  }
  const out: Array<string> = []
  for (const { path: p, messages, unknown } of byPath.values()) {
    if (unknown) {
      out.push(`  ${describePath(p)}: unknown field (known: ${known})`)
      continue
    }
    if (messages.length === 0) continue
    const parsed = messages.map((m) => /^Expected (.+), actual (.+)$/s.exec(m))
    const same = parsed.every((m) => m && m[2] === parsed[0]![2])
    out.push(
      `  ${describePath(p)}: ${
        same && parsed.length > 1
          ? `Expected ${parsed.map((m) => m![1]).join(" | ")}, actual ${parsed[0]![2]}`
          : [...new Set(messages)].join("; ")
      }`
    )
  }
  return out
}

/** Read and validate one config file; a missing file is `undefined`. */
export const readConfigFile = (file: string): Effect.Effect<ConfigFile | undefined, CliError> =>
  Effect.suspend(() => {
    let text: string
    try {
      text = fs.readFileSync(file, "utf8")
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return Effect.succeed(undefined)
      return Effect.fail(
        new CliError({ code: ExitCode.Usage, message: `${file}: cannot be read (${(e as Error).message})` })
      )
    }
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch (e) {
      return Effect.fail(
        new CliError({
          code: ExitCode.Usage,
          message: `${file} is not valid JSON: ${(e as Error).message}`,
          detail: "Fix the file or remove it; the schema is in the README of @musekit/cli."
        })
      )
    }
    const r = decode(json)
    if (r._tag === "Right") return Effect.succeed(r.right)
    const lines = describeIssues(ParseResult.ArrayFormatter.formatErrorSync(r.left))
    return Effect.fail(
      new CliError({
        code: ExitCode.Usage,
        message: `${file} is not a valid muse config:\n${lines.join("\n")}`
      })
    )
  })

export interface Loaded {
  readonly root: string
  readonly user: ConfigFile | undefined
  readonly project: ConfigFile | undefined
  readonly userFile: string
  readonly projectFile: string
}

/**
 * The user's config file and, when `project` is true (the folder is trusted, see `trust.ts`), the
 * project's. An untrusted project's file is not read at all.
 */
export const load = (
  root: string,
  env: NodeJS.ProcessEnv = process.env,
  options: { readonly project: boolean } = { project: false }
): Effect.Effect<Loaded, CliError> =>
  Effect.gen(function* () {
    const userFile = userConfigFile(env)
    const projectFile = projectConfigFile(root)
    const user = yield* readConfigFile(userFile)
    const project = options.project ? yield* readConfigFile(projectFile) : undefined
    return { root, user, project, userFile, projectFile }
  })

const expandHome = (p: string) => (p === "~" || p.startsWith("~/") ? path.join(os.homedir(), p.slice(1)) : p)

/**
 * The state directory: `$MUSE_HOME`, else the user's `stateDir`, else the default. A project's
 * `stateDir` is never used: a repository must not choose where the logs of the sessions run in it
 * are kept (inside itself, say, to be committed and pushed).
 */
export const stateDir = (loaded: Loaded, env: NodeJS.ProcessEnv = process.env): string => {
  if (env.MUSE_HOME !== undefined && env.MUSE_HOME !== "") return path.resolve(expandHome(env.MUSE_HOME))
  if (loaded.user?.stateDir) return path.resolve(path.dirname(loaded.userFile), expandHome(loaded.user.stateDir))
  return path.join(
    env.XDG_STATE_HOME && env.XDG_STATE_HOME !== "" ? env.XDG_STATE_HOME : path.join(os.homedir(), ".local", "state"),
    "muse"
  )
}

/** Where the model spec came from, for messages. */
export interface ModelChoice {
  readonly spec: string
  readonly source: string
}

/** The model: the flag, else `MUSE_MODEL`, else the project file, else the user file. */
export const chooseModel = (
  flag: string | undefined,
  loaded: Loaded,
  env: NodeJS.ProcessEnv = process.env
): ModelChoice | undefined => {
  if (flag) return { spec: flag, source: "--model" }
  if (env.MUSE_MODEL && env.MUSE_MODEL.trim() !== "") return { spec: env.MUSE_MODEL.trim(), source: "MUSE_MODEL" }
  if (loaded.project?.model) return { spec: loaded.project.model, source: loaded.projectFile }
  if (loaded.user?.model) return { spec: loaded.user.model, source: loaded.userFile }
  return undefined
}

/** Parse `--allow "<tool>[:<pattern>]"`. */
export const parseRuleFlag = (text: string, action: "allow" | "deny"): Effect.Effect<Approvals.Rule, CliError> => {
  const t = text.trim()
  const colon = t.indexOf(":")
  const tool = (colon === -1 ? t : t.slice(0, colon)).trim()
  const pattern = colon === -1 ? undefined : t.slice(colon + 1).trim()
  if (tool === "" || !/^[\w*?.-]+$/.test(tool)) {
    return Effect.fail(
      new CliError({
        code: ExitCode.Usage,
        message: `--${action} "${text}": expected <tool>[:<pattern>], e.g. --${action} "run_shell:npm test*"`
      })
    )
  }
  return Effect.succeed(
    pattern === undefined || pattern === ""
      ? { tool, action, scope: "session" as const }
      : { tool, pattern, action, scope: "session" as const }
  )
}

/** The configured context window for a model spec: the project file's entry, else the user file's. */
export const configuredWindow = (
  spec: string,
  loaded: Loaded
): { readonly tokens: number; readonly source: string } | undefined => {
  const slash = spec.indexOf("/")
  const keys = slash === -1 ? [spec] : [spec, spec.slice(slash + 1)]
  for (const [file, config] of [
    [loaded.projectFile, loaded.project],
    [loaded.userFile, loaded.user]
  ] as const) {
    for (const k of keys) {
      const tokens = config?.models?.[k]?.contextWindow
      if (tokens !== undefined) return { tokens, source: `${file} (models["${k}"].contextWindow)` }
    }
  }
  return undefined
}

/**
 * The sandbox settings of a new session: the flag's mode, else the project file's, else the user
 * file's, else `workspace-write`; hosts, writable and hidden paths of both files add up (a project
 * file is read only in a trusted folder). Paths are taken relative to the file that names them.
 */
export const sandboxSettings = (flag: Sandbox.Mode | undefined, loaded: Loaded): Sandbox.Settings => {
  const files = [
    [loaded.userFile, loaded.user],
    [loaded.projectFile, loaded.project]
  ] as const
  const paths = (pick: (c: ConfigFile) => ReadonlyArray<string> | undefined) =>
    files.flatMap(([file, c]) =>
      (c ? (pick(c) ?? []) : []).map((p) => {
        const e = expandHome(p)
        return path.isAbsolute(e) ? e : path.resolve(file === loaded.projectFile ? loaded.root : path.dirname(file), e)
      })
    )
  const hosts = files.flatMap(([, c]) => c?.sandbox?.network?.allow ?? [])
  const writable = paths((c) => c.sandbox?.writable)
  const hidden = paths((c) => c.sandbox?.hidden)
  const processes = loaded.project?.sandbox?.processes ?? loaded.user?.sandbox?.processes
  const reuse = loaded.project?.sandbox?.reuse ?? loaded.user?.sandbox?.reuse
  return {
    mode: flag ?? loaded.project?.sandbox?.mode ?? loaded.user?.sandbox?.mode ?? "workspace-write",
    ...(hosts.length > 0 ? { network: { allow: [...new Set(hosts)] } } : {}),
    ...(writable.length > 0 ? { writable } : {}),
    ...(hidden.length > 0 ? { hidden } : {}),
    ...(processes !== undefined ? { processes } : {}),
    ...(reuse !== undefined ? { reuse } : {})
  }
}
