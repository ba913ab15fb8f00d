/**
 * MCP servers as tools: every tool a server lists becomes `mcp__<server>__<tool>`, with the
 * server's JSON schema for its parameters, and goes through approvals and the event log like any
 * tool — a replay serves its results from the log and starts no server.
 *
 * The tools are fixed when a session starts: `McpServers.start` lists them and the session records
 * that `Discovery` (the CLI keeps it in `session.started`); a replay or a resume builds the same
 * tools from the record (`make({ discovery })`), so the model sees the same tool list and the
 * prompt cache keeps working. A resumed session starts its servers again in the background.
 *
 * How much a tool may do is decided here, not by the server: a server's annotations are its own
 * claims. A tool is a `read` tool (runs without asking in the `ask` and `auto-edit` modes) only when
 * it is served by a local (stdio) server and says both `readOnlyHint: true` and
 * `openWorldHint: false`. Every other tool of a local server is `exec` (it runs as a program on this
 * machine), and every tool of a remote server is `network` (its arguments leave the machine): both
 * ask, unless a rule allows them (`mcp__github__*`, `mcp__fs__read_*`).
 *
 * @example
 * ```ts
 * import { Plugin } from "@musekit/core"
 * import { McpConfig, McpPlugin } from "@musekit/plugin-mcp"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function* () {
 *   const { servers } = McpConfig.read(".muse/mcp.json")
 *   // connected now, stopped when the scope closes; keep `discovery` to replay the session later
 *   const { plugin, discovery } = yield* McpPlugin.connect({ servers, cwd: process.cwd() })
 *   const layer = Plugin.layer([plugin]) // tools mcp__<server>__<tool> for every agent
 * }).pipe(Effect.scoped)
 * ```
 */

import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { Plugin, Tools } from "@musekit/core"
import { Effect, type Scope } from "effect"
import * as Sdk from "./internal/sdk.js"
import type * as McpConfig from "./McpConfig.js"
import * as McpServers from "./McpServers.js"

/** The plugin's name (sessions record the names of their plugins). */
export const name = "mcp"

const MAX_NAME = 64
const MAX_DESCRIPTION = 2048

const fnv1a = (text: string): string => {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return (h >>> 0).toString(16).padStart(8, "0")
}

const clean = (s: string) => s.replace(/[^a-zA-Z0-9_-]/g, "_")

/** `mcp__<server>__<tool>`, with characters a model provider refuses replaced and long names shortened. */
export const toolName = (server: string, tool: string): string => {
  const full = `mcp__${clean(server)}__${clean(tool)}`
  return full.length <= MAX_NAME ? full : `${full.slice(0, MAX_NAME - 9)}_${fnv1a(`${server}\u0000${tool}`)}`
}

/** The effect class muse gives a server's tool (see the module comment for why). */
export const effectOf = (
  transport: McpConfig.Transport,
  annotations: McpServers.ToolSpec["annotations"]
): Tools.EffectClass =>
  transport !== "stdio"
    ? "network"
    : annotations?.readOnlyHint === true && annotations.openWorldHint === false
      ? "read"
      : "exec"

/** The schema shown to the model: the server's, without `$schema` (some providers refuse it), always an object. */
const modelSchema = (schema: Readonly<Record<string, unknown>>): object => {
  const { $schema: _, ...rest } = schema
  return rest.type === undefined ? { type: "object", ...rest } : rest
}

/** What a model reads of a tool result: its text, and its structured content when there is some. */
export const resultOf = (r: CallToolResult): { readonly text: string; readonly structuredContent?: unknown } => {
  const parts: Array<string> = []
  for (const c of r.content ?? []) {
    switch (c.type) {
      case "text":
        parts.push(c.text)
        break
      case "image":
      case "audio":
        parts.push(`[${c.type} ${c.mimeType}, ${Math.round((c.data.length * 3) / 4)} bytes: not shown]`)
        break
      case "resource":
        parts.push(
          "text" in c.resource && typeof c.resource.text === "string" ? c.resource.text : `[resource ${c.resource.uri}]`
        )
        break
      case "resource_link":
        parts.push(`[resource ${c.uri}${c.name ? ` (${c.name})` : ""}]`)
        break
    }
  }
  return {
    text: parts.join("\n"),
    ...(r.structuredContent !== undefined ? { structuredContent: r.structuredContent } : {})
  }
}

export interface Options {
  /** The servers and tools as the session found them when it started. */
  readonly discovery: McpServers.Discovery
  /** The running servers. Absent in a replay: every result comes from the log, and no server may start. */
  readonly servers?: McpServers.Service | undefined
}

/** The tool definitions of `discovery` (the SDK's JSON Schema validator checks their arguments). */
export const tools = (options: Options): Effect.Effect<ReadonlyArray<Tools.Definition>> =>
  Effect.gen(function* () {
    const discovery = options.discovery
    if (discovery.servers.every((s) => s.tools.length === 0)) return []
    const validator = yield* Effect.promise(Sdk.loadValidator)
    const taken = new Set<string>()
    const out: Array<Tools.Definition> = []
    for (const server of discovery.servers) {
      for (const spec of server.tools) {
        let tool = toolName(server.name, spec.name)
        // two tools whose names differ only in characters the name cannot hold
        if (taken.has(tool)) tool = `${tool.slice(0, MAX_NAME - 9)}_${fnv1a(`${server.name}\u0000${spec.name}`)}`
        if (taken.has(tool)) continue
        taken.add(tool)
        const { $schema: _, ...schema } = spec.inputSchema
        let check: (u: unknown) => { valid: boolean; errorMessage?: string | undefined }
        try {
          check = validator.getValidator(schema as never)
        } catch {
          // a schema the validator cannot compile: the server checks the arguments itself
          check = () => ({ valid: true })
        }
        const effect = effectOf(server.transport, spec.annotations)
        const description = (
          spec.description ??
          spec.title ??
          spec.annotations?.title ??
          `${spec.name} (MCP server ${server.name})`
        ).slice(0, MAX_DESCRIPTION)
        const serverName = server.name
        out.push(
          Tools.fromJsonSchema({
            name: tool,
            description,
            jsonSchema: modelSchema(schema),
            validate: (params) => {
              const r = check(params)
              return r.valid ? undefined : (r.errorMessage ?? "invalid").replace(/\bdata\b/g, "arguments")
            },
            effect,
            handler: (params, ctx) =>
              options.servers
                ? options.servers
                    .call(
                      serverName,
                      spec.name,
                      { ...params },
                      {
                        onProgress: (text) => Effect.runFork(ctx.progress(`${text}\n`))
                      }
                    )
                    .pipe(
                      Effect.mapError((e) => new Tools.ToolError({ message: e.message })),
                      Effect.flatMap((r) => {
                        const result = resultOf(r)
                        return r.isError
                          ? Effect.fail(
                              new Tools.ToolError({
                                message: `${spec.name} (MCP server ${serverName}) failed: ${result.text || "no reason given"}`
                              })
                            )
                          : Effect.succeed(result)
                      })
                    )
                : Effect.dieMessage(
                    `MCP server ${serverName} called during a replay: replays take every result from the log`
                  )
          })
        )
      }
    }
    return out
  })

/** The plugin: the tools of `discovery`, run on `servers`. */
export const make = (options: Options): Effect.Effect<Plugin.Plugin> =>
  Effect.map(tools(options), (list) =>
    Plugin.make({
      name,
      tools: list,
      // connections are not session state: a restored session starts its servers again
      checkpoint: "stateless"
    })
  )

/**
 * Start the servers, list their tools and make the plugin; the servers stop when the scope
 * closes. Keep `discovery` with the session to replay it (`make({ discovery })`).
 */
export const connect = (
  options: McpServers.Options
): Effect.Effect<
  { readonly plugin: Plugin.Plugin; readonly discovery: McpServers.Discovery; readonly servers: McpServers.Service },
  never,
  Scope.Scope
> =>
  Effect.gen(function* () {
    const servers = yield* Effect.acquireRelease(
      Effect.sync(() => McpServers.make(options)),
      (s) => s.close
    )
    const discovery = yield* servers.start
    const plugin = yield* make({ discovery, servers })
    return { plugin, discovery, servers }
  })
