/**
 * MCP servers in `muse`: where they are configured, and the plugin a session runs with.
 *
 * Servers come, in this order (a later one replaces an earlier one of the same name), from
 * `mcpServers` in the user's `config.json`, the user's `mcp.json` beside it, and — in a trusted
 * folder only, since they start programs — `mcpServers` in `.muse/config.json` and
 * `.muse/mcp.json`; an editor speaking ACP adds its own. Every file has the shape of Claude Code's
 * `.mcp.json`. A new session starts them and records what they offer; a resumed session starts
 * them again in the background; a replay starts nothing. The MCP SDK is loaded only when a session
 * has a server.
 *
 * @example
 * ```ts
 * const found = Mcp.load("/work/app", process.env, { project: trusted })
 * // found.servers: { github: {...}, fs: {...} }; found.problems: lines for the user
 * ```
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type { Plugin } from "@musekit/core"
import type { McpConfig, McpServers } from "@musekit/plugin-mcp"
import { Effect, Either, Schema } from "effect"
import * as Config from "./config.js"
import { version } from "./version.js"

/** `mcp.json` beside the user's `config.json`. */
export const userFile = (env: NodeJS.ProcessEnv = process.env): string =>
  path.join(path.dirname(Config.userConfigFile(env)), "mcp.json")

/** The project's `.muse/mcp.json`. */
export const projectFile = (root: string): string => path.join(root, ".muse", "mcp.json")

type Module = typeof import("@musekit/plugin-mcp")

let module: Promise<Module> | undefined
/** The plugin package, loaded on first use (with it, nothing of the SDK is loaded yet either). */
export const loadModule = (): Promise<Module> => {
  module ??= import("@musekit/plugin-mcp")
  return module
}

export interface Found {
  readonly servers: Readonly<Record<string, McpConfig.Server>>
  readonly problems: ReadonlyArray<string>
}

const none: Found = { servers: {}, problems: [] }

/**
 * The servers configured for `root`. `project`: whether the folder's own files may take effect
 * (folder trust); `loaded`: the config files already read (their `mcpServers`).
 */
export const load = (
  root: string,
  env: NodeJS.ProcessEnv,
  options: { readonly project: boolean; readonly loaded?: Config.Loaded | undefined }
): Effect.Effect<Found> =>
  Effect.gen(function* () {
    const files: Array<{ readonly json?: unknown; readonly file: string }> = []
    const withServers = (cfg: Config.ConfigFile | undefined, file: string) =>
      cfg?.mcpServers !== undefined ? [{ json: { mcpServers: cfg.mcpServers }, file }] : []
    files.push(...withServers(options.loaded?.user, Config.userConfigFile(env)))
    if (fs.existsSync(userFile(env))) files.push({ file: userFile(env) })
    if (options.project) {
      files.push(...withServers(options.loaded?.project, Config.projectConfigFile(root)))
      if (fs.existsSync(projectFile(root))) files.push({ file: projectFile(root) })
    }
    if (files.length === 0) return none
    const { McpConfig } = yield* Effect.promise(loadModule)
    return McpConfig.merge(
      files.map((f) => ("json" in f ? McpConfig.fromJson(f.json, f.file) : McpConfig.read(f.file)))
    )
  })

/** Servers an ACP client hands over with `session/new` or `session/load`. */
export interface ClientServer {
  readonly name: string
  readonly type?: "http" | "sse" | undefined
  readonly command?: string | undefined
  readonly args?: ReadonlyArray<string> | undefined
  readonly env?: ReadonlyArray<{ readonly name: string; readonly value: string }> | undefined
  readonly url?: string | undefined
  readonly headers?: ReadonlyArray<{ readonly name: string; readonly value: string }> | undefined
}

/** The editor's servers in muse's shape (they come from the user's editor settings, not the folder). */
export const fromClient = (servers: ReadonlyArray<ClientServer>, source = "the editor"): Found => {
  const out: Record<string, McpConfig.Server> = {}
  const problems: Array<string> = []
  for (const s of servers) {
    const pairs = (list: ClientServer["env"]) => Object.fromEntries((list ?? []).map((p) => [p.name, p.value]))
    if (!/^[A-Za-z0-9_.-]{1,64}$/.test(s.name)) {
      problems.push(`${source}: MCP server name "${s.name}" must be 1 to 64 letters, digits, "_", "-" or "."`)
    } else if (s.url !== undefined && (s.type === "http" || s.type === "sse")) {
      out[s.name] = { transport: s.type, url: s.url, headers: pairs(s.headers), source }
    } else if (s.command !== undefined) {
      out[s.name] = { transport: "stdio", command: s.command, args: [...(s.args ?? [])], env: pairs(s.env), source }
    } else problems.push(`${source}: MCP server "${s.name}" has neither a command nor a url`)
  }
  return { servers: out, problems }
}

export const merge = (...found: ReadonlyArray<Found>): Found => ({
  servers: Object.assign({}, ...found.map((f) => f.servers)),
  problems: found.flatMap((f) => f.problems)
})

/** The plugin of a session, and what it found. */
export interface Loaded {
  readonly plugin: Plugin.Plugin
  /** The running servers (none in a replay). */
  readonly servers: McpServers.Service | undefined
  /** What a new session records (`Config.discovered.mcp`). */
  readonly discovery: McpServers.Discovery
  readonly warnings: ReadonlyArray<string>
}

/** A new session: start the servers, list their tools. `undefined` when no server is configured. */
export const start = (
  found: Found,
  options: { readonly root: string; readonly env: NodeJS.ProcessEnv }
): Effect.Effect<Loaded | undefined> =>
  Effect.gen(function* () {
    if (Object.keys(found.servers).length === 0) return undefined
    const m = yield* Effect.promise(loadModule)
    const servers = m.McpServers.make({
      servers: found.servers,
      cwd: options.root,
      env: options.env,
      clientInfo: { name: "muse", version: version() }
    })
    const discovery = yield* servers.start
    const plugin = yield* m.McpPlugin.make({ discovery, servers })
    const warnings = discovery.servers.flatMap((s) => (s.status === "failed" && s.error ? [s.error] : []))
    return { plugin, servers, discovery, warnings }
  })

/**
 * A recorded session (resume or replay): the tools it recorded; for a resume, the servers as
 * configured now, started in the background.
 */
export const recorded = (
  discovered: unknown,
  found: Found | undefined,
  options: { readonly root: string; readonly env: NodeJS.ProcessEnv }
): Effect.Effect<Loaded> =>
  Effect.gen(function* () {
    const m = yield* Effect.promise(loadModule)
    const warnings: Array<string> = []
    const decoded = Schema.decodeUnknownEither(m.McpServers.Discovery)(discovered)
    const discovery = Either.getOrElse(decoded, () => ({ servers: [] }))
    if (Either.isLeft(decoded))
      warnings.push("the session's record of its MCP servers is unreadable; their tools are off")
    let servers: McpServers.Service | undefined
    if (found) {
      const recordedNames = discovery.servers.filter((s) => s.tools.length > 0).map((s) => s.name)
      const missing = recordedNames.filter((n) => !(n in found.servers))
      if (missing.length > 0) {
        warnings.push(
          `MCP server${missing.length === 1 ? "" : "s"} ${missing.join(", ")} of this session ${missing.length === 1 ? "is" : "are"} not configured now; ${missing.length === 1 ? "its" : "their"} tools will fail`
        )
      }
      const used = Object.fromEntries(Object.entries(found.servers).filter(([n]) => recordedNames.includes(n)))
      servers = m.McpServers.make({
        servers: used,
        cwd: options.root,
        env: options.env,
        clientInfo: { name: "muse", version: version() }
      })
      yield* servers.startInBackground
    }
    const plugin = yield* m.McpPlugin.make({ discovery, servers })
    return { plugin, servers, discovery, warnings }
  })

/** Lines for `/mcp`: each server, its state and its tools. */
export const statusLines = (
  servers: McpServers.Service | undefined,
  discovery: McpServers.Discovery | undefined,
  style: {
    readonly dim: (s: string) => string
    readonly green: (s: string) => string
    readonly red: (s: string) => string
    readonly yellow: (s: string) => string
  },
  safe: (s: string) => string
): Effect.Effect<Array<string>> =>
  Effect.gen(function* () {
    if (!discovery || discovery.servers.length === 0) {
      return [
        "no MCP servers in this session.",
        style.dim(
          "Add them to ~/.config/muse/mcp.json or .muse/mcp.json (the shape of Claude Code's .mcp.json), then start a new session."
        )
      ]
    }
    const now = servers ? yield* servers.status : []
    const lines: Array<string> = []
    for (const s of discovery.servers) {
      const live = now.find((x) => x.name === s.name)
      const state = live?.state ?? (s.status === "connected" ? "recorded" : "failed")
      const mark =
        state === "connected"
          ? style.green("●")
          : state === "failed" || state === "stopped"
            ? style.red("●")
            : style.yellow("●")
      const info = s.info ? ` ${style.dim(`${safe(s.info.name)} ${safe(s.info.version)}`)}` : ""
      lines.push(`${mark} ${safe(s.name)} ${style.dim(`(${s.transport}, ${state})`)}${info}`)
      if (live) lines.push(style.dim(`  ${safe(live.target)} · ${safe(live.source)}`))
      const error = live?.error ?? s.error
      if (error && state !== "connected") lines.push(`  ${style.red(safe(error))}`)
      if (s.tools.length > 0) {
        lines.push(
          style.dim(
            `  ${s.tools.length} tool${s.tools.length === 1 ? "" : "s"}: ${s.tools.map((t) => safe(t.name)).join(", ")}`
          )
        )
      }
    }
    return lines
  })
